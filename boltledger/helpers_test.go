package boltledger

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

const testAgent = "agent-7f3c"

// openNew opens a new ledger in a fresh directory, closed at cleanup.
func openNew(t testing.TB) (*Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.ledger")
	return openAt(t, path), path
}

// openAt opens the ledger at path for testAgent, closed at cleanup.
func openAt(t testing.TB, path string) *Ledger {
	t.Helper()
	l, err := Open(path, Options{AgentID: testAgent})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// countRecords returns how many records a bucket of an open ledger holds.
func countRecords(t *testing.T, l *Ledger, bucket []byte) int {
	t.Helper()
	n := 0
	require.NoError(t, l.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	}))
	return n
}

// fixedClock is a settable clock for records' write times.
type fixedClock struct{ at time.Time }

func (c *fixedClock) now() time.Time { return c.at }
