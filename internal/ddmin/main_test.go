package ddmin

import (
	"testing"

	"go.uber.org/goleak"
)

// ddmin starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
