package receipt

import (
	"testing"

	"go.uber.org/goleak"
)

// receipt starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
