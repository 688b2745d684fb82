package seedrand

import (
	"testing"

	"go.uber.org/goleak"
)

// seedrand starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
