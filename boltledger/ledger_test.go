package boltledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/ledgertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The bandonce.Ledger contract. A reopen opens a copy of the file taken
// while the ledger is still open, as a crash of the process would leave
// it: what a call wrote must be in the file, committed, when it returns.
func TestLedgerKeepsTheContract(t *testing.T) {
	ledgertest.Run(t,
		func(t *testing.T) bandonce.Ledger {
			l, _ := openNew(t)
			return l
		},
		func(t *testing.T, l bandonce.Ledger) bandonce.Ledger {
			crashed := l.(*Ledger)
			snapshot, err := os.ReadFile(crashed.path)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "after-a-crash.ledger")
			require.NoError(t, os.WriteFile(path, snapshot, fileMode))
			require.NoError(t, crashed.Close()) // as the dead process's file handle would be
			return openAt(t, path)
		})
}

// KeyUnknown and a cleared ack-pending record delete theirs, so finished
// messages take no room.
func TestDeletionsLeaveNoRecord(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", bandonce.KeyAccepted))
	require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", bandonce.KeyUnknown))
	for i := range 50 {
		id := fmt.Sprintf("m%d", i)
		require.NoError(t, l.SetAckPending(ctx, "room-1", id, true))
		require.NoError(t, l.SetAckPending(ctx, "room-1", id, false))
	}
	assert.Zero(t, countRecords(t, l, keysBucket), "KeyUnknown deletes the record")
	assert.Zero(t, countRecords(t, l, acksBucket), "done messages take no room")
}

func TestStatsCountCommitsAndBytes(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent))
	first := l.Stats()
	assert.Equal(t, int64(1), first.Syncs)
	// At least the leaf page, the freelist page and the meta page.
	assert.GreaterOrEqual(t, first.BytesWritten, 3*l.pageSize)

	require.NoError(t, l.SetAckPending(ctx, "room-1", "absent", false))
	require.NoError(t, l.SetKey(ctx, "room-1", "absent", bandonce.KeyUnknown))
	assert.Equal(t, first, l.Stats(), "deleting what is not there commits nothing")

	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyAccepted))
	assert.Equal(t, int64(2), l.Stats().Syncs)
	assert.Greater(t, l.Stats().BytesWritten, first.BytesWritten)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
	assert.Equal(t, int64(3), l.Stats().Syncs, "a step is one commit")

	require.NoError(t, l.Close())
	assert.Equal(t, Stats{}, openAt(t, path).Stats(), "stats count from Open")
}

// Commits from many rooms at once are each counted once, and a write
// that changes nothing is none.
func TestStatsCountTheCommitsOfConcurrentRooms(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	const rooms, messages = 8, 15
	var wg sync.WaitGroup
	for r := range rooms {
		wg.Go(func() {
			room := fmt.Sprintf("room-%d", r)
			for m := range messages {
				id := fmt.Sprintf("m%d", m)
				assert.NoError(t, l.SetKey(ctx, room, id, bandonce.KeyAccepted))
				assert.NoError(t, l.SetStep(ctx, room, id, "s", nil))
				assert.NoError(t, l.SetAckPending(ctx, room, id, m == messages-1)) // one commit a room
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(rooms*(2*messages+1)), l.Stats().Syncs)
	assert.Equal(t, rooms*messages, countRecords(t, l, keysBucket))
	assert.Equal(t, rooms*messages, countRecords(t, l, stepsBucket))
	assert.Equal(t, rooms, countRecords(t, l, acksBucket))
}

// The suite lets a ledger either honour an ended context or ignore it;
// this one refuses every call, and every call once it is closed.
func TestCallsFailOnACancelledContextOrAClosedLedger(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		close bool
		want  error
	}{
		{"cancelled context", cancelled, false, context.Canceled},
		{"closed ledger", context.Background(), true, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openNew(t)
			if tc.close {
				require.NoError(t, l.Close())
				require.NoError(t, l.Close(), "a second Close does nothing")
			}
			_, keyErr := l.Key(tc.ctx, "room-1", "k")
			_, ackErr := l.AckPending(tc.ctx, "room-1", "m")
			_, _, stepErr := l.Step(tc.ctx, "room-1", "m", "s")
			_, pruneErr := l.Prune(tc.ctx, l.now())
			for call, err := range map[string]error{
				"SetKey":        l.SetKey(tc.ctx, "room-1", "k", bandonce.KeyIntent),
				"SetAckPending": l.SetAckPending(tc.ctx, "room-1", "m", true),
				"SetStep":       l.SetStep(tc.ctx, "room-1", "m", "s", nil),
				"Key":           keyErr,
				"AckPending":    ackErr,
				"Step":          stepErr,
				"Prune":         pruneErr,
			} {
				assert.ErrorIs(t, err, tc.want, call)
			}
			assert.Zero(t, l.Stats().Syncs, "nothing was committed")
		})
	}
}

func TestSetKeyRejectsStatesThatAreNotKeyStates(t *testing.T) {
	l, _ := openNew(t)
	for _, state := range []bandonce.KeyState{-1, 4, 257} {
		err := l.SetKey(context.Background(), "room-1", "k", state)
		require.ErrorIs(t, err, ErrInvalidState, "state %d", state)
	}
	assert.Zero(t, l.Stats().Syncs)
}

func TestOversizedKeyIsAnErrorNotAPanic(t *testing.T) {
	l, _ := openNew(t)
	huge := strings.Repeat("k", bolt.MaxKeySize)
	err := l.SetKey(context.Background(), "room-1", huge, bandonce.KeyIntent)
	require.ErrorIs(t, err, berrors.ErrKeyTooLarge)
	got, err := l.Key(context.Background(), "room-1", "k")
	require.NoError(t, err, "the ledger stays usable")
	assert.Equal(t, bandonce.KeyUnknown, got)
}

func TestDamagedRecordIsReportedAsCorrupt(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(keysBucket).Put(recordKey("room-1", "bad-state"), encodeRecord(9, l.now())); err != nil {
			return err
		}
		if err := tx.Bucket(keysBucket).Put(recordKey("room-1", "short"), []byte{1}); err != nil {
			return err
		}
		return tx.Bucket(acksBucket).Put(recordKey("room-1", "bad-ack"), encodeRecord(2, l.now()))
	}))
	for _, key := range []string{"bad-state", "short"} {
		_, err := l.Key(ctx, "room-1", key)
		require.ErrorIs(t, err, ErrCorrupt, key)
	}
	_, err := l.AckPending(ctx, "room-1", "bad-ack")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = l.Prune(ctx, l.now().Add(1))
	require.ErrorIs(t, err, ErrCorrupt)
}

// bbolt opens a file whose record pages are damaged (it reads only the
// meta and freelist pages); the damage shows when a call reaches it, as
// ErrCorrupt from that call, and the Ledger stays usable otherwise.
func TestDamagedPagesSurfaceAsErrCorruptFromTheCallThatReadsThem(t *testing.T) {
	ctx := context.Background()
	ledger := sealedLedger(t)
	pageSize := os.Getpagesize()
	for i := 4 * pageSize; i < 100*pageSize; i++ {
		ledger[i] = 0xff
	}
	path := filepath.Join(t.TempDir(), "agent.ledger")
	require.NoError(t, os.WriteFile(path, ledger, 0o600))
	l := openAt(t, path)

	const room = "3f1e7c2a-0000-4000-8000-000000000001"
	intact, damaged := 0, 0
	for i := range 3000 {
		state, err := l.Key(ctx, room, fmt.Sprintf("msg:%d", i))
		switch {
		case err == nil:
			assert.Equal(t, bandonce.KeyAccepted, state)
			intact++
		case errors.Is(err, ErrCorrupt):
			assert.Contains(t, err.Error(), path)
			damaged++
		default:
			t.Fatalf("key %d: %v", i, err)
		}
	}
	assert.Positive(t, intact)
	assert.Positive(t, damaged)
	require.ErrorIs(t, l.SetKey(ctx, room, "msg:1500", bandonce.KeyIntent), ErrCorrupt)
	require.NoError(t, l.SetKey(ctx, "room-elsewhere", "k", bandonce.KeyIntent))
}
