package oracle

import (
	"testing"

	"go.uber.org/goleak"
)

// oracle starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
