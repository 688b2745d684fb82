package keyguard_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; its tests' servers must all be gone.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
