package boltledger

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// holdLockEnv, when set to a ledger path, turns this test binary into the
// lock holder of TestOpenFailsWhileAnotherProcessHoldsTheLock: it opens the
// ledger, says "locked" on stdout, and holds the lock until stdin closes.
const holdLockEnv = "BOLTLEDGER_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdLockEnv); path != "" {
		os.Exit(holdLock(path))
	}
	goleak.VerifyTestMain(m)
}

func holdLock(path string) int {
	l, err := Open(path, Options{AgentID: testAgent})
	if err != nil {
		fmt.Println("open failed:", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	if err := l.Close(); err != nil {
		fmt.Println("close failed:", err)
		return 1
	}
	return 0
}
