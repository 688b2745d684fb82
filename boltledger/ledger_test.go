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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

func TestKeyRoundTripsEveryState(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	for _, state := range []bandonce.KeyState{
		bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped, bandonce.KeyIntent, bandonce.KeyUnknown,
	} {
		require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", state))
		got, err := l.Key(ctx, "room-1", "msg:1")
		require.NoError(t, err)
		assert.Equal(t, state, got)
	}
	assert.Zero(t, countRecords(t, l, keysBucket), "KeyUnknown deletes the record")
}

func TestKeyOfAnUnseenKeyIsUnknown(t *testing.T) {
	l, _ := openNew(t)
	got, err := l.Key(context.Background(), "room-1", "never-set")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyUnknown, got)
	assert.True(t, l.Durable())
}

func TestAckPendingRoundTripsAndDoneDeletes(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	pending, err := l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.False(t, pending)

	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", true))
	pending, err = l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.True(t, pending)

	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", false))
	pending, err = l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.False(t, pending)
	assert.Zero(t, countRecords(t, l, acksBucket))
}

func TestDoneMessagesDoNotGrowTheAckRecords(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	for i := range 50 {
		id := fmt.Sprintf("m%d", i)
		require.NoError(t, l.SetAckPending(ctx, "room-1", id, true))
		require.NoError(t, l.SetAckPending(ctx, "room-1", id, false))
	}
	assert.Zero(t, countRecords(t, l, acksBucket))
}

func TestRecordsAreNamespacedPerRoom(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-a", "k", bandonce.KeyAccepted))
	require.NoError(t, l.SetKey(ctx, "ab", "c", bandonce.KeyIntent))
	require.NoError(t, l.SetAckPending(ctx, "room-a", "m", true))

	for _, tc := range []struct {
		room, key string
		want      bandonce.KeyState
	}{
		{"room-a", "k", bandonce.KeyAccepted},
		{"room-b", "k", bandonce.KeyUnknown},
		{"ab", "c", bandonce.KeyIntent},
		{"a", "bc", bandonce.KeyUnknown}, // same bytes joined, other room
		{"abc", "", bandonce.KeyUnknown},
	} {
		got, err := l.Key(ctx, tc.room, tc.key)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "room %q key %q", tc.room, tc.key)
	}
	pending, err := l.AckPending(ctx, "room-b", "m")
	require.NoError(t, err)
	assert.False(t, pending)
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	want := map[[2]string]bandonce.KeyState{}
	states := []bandonce.KeyState{bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped}
	for r := range 3 {
		for k := range 30 {
			room, key := fmt.Sprintf("room-%d", r), fmt.Sprintf("key-%d", k)
			state := states[(r+k)%len(states)]
			require.NoError(t, l.SetKey(ctx, room, key, state))
			want[[2]string{room, key}] = state
		}
		require.NoError(t, l.SetAckPending(ctx, fmt.Sprintf("room-%d", r), "pending", true))
		require.NoError(t, l.SetAckPending(ctx, fmt.Sprintf("room-%d", r), "done", true))
		require.NoError(t, l.SetAckPending(ctx, fmt.Sprintf("room-%d", r), "done", false))
	}
	require.NoError(t, l.Close())

	reopened := openAt(t, path)
	assert.Equal(t, Stats{}, reopened.Stats(), "stats count from Open")
	for rk, state := range want {
		got, err := reopened.Key(ctx, rk[0], rk[1])
		require.NoError(t, err)
		assert.Equal(t, state, got, "room %q key %q", rk[0], rk[1])
	}
	for r := range 3 {
		pending, err := reopened.AckPending(ctx, fmt.Sprintf("room-%d", r), "pending")
		require.NoError(t, err)
		assert.True(t, pending)
		done, err := reopened.AckPending(ctx, fmt.Sprintf("room-%d", r), "done")
		require.NoError(t, err)
		assert.False(t, done)
	}
}

// The intent must be in the file, committed, when SetKey returns: a copy
// of the file taken at that moment, as a crash would leave it, has it.
func TestIntentIsCommittedBeforeSetKeyReturns(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", bandonce.KeyIntent))
	assert.Equal(t, int64(1), l.Stats().Syncs)

	snapshot, err := os.ReadFile(path)
	require.NoError(t, err)
	copyPath := path + ".crash-copy"
	require.NoError(t, os.WriteFile(copyPath, snapshot, 0o600))
	crashed := openAt(t, copyPath)
	got, err := crashed.Key(ctx, "room-1", "msg:1")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyIntent, got)
}

func TestStatsCountCommitsAndBytes(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
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
}

func TestSetKeyRejectsStatesThatAreNotKeyStates(t *testing.T) {
	l, _ := openNew(t)
	for _, state := range []bandonce.KeyState{-1, 4, 257} {
		err := l.SetKey(context.Background(), "room-1", "k", state)
		require.ErrorIs(t, err, ErrInvalidState, "state %d", state)
	}
	assert.Zero(t, l.Stats().Syncs)
}

func TestCancelledContextWritesNothing(t *testing.T) {
	l, _ := openNew(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent), context.Canceled)
	require.ErrorIs(t, l.SetAckPending(ctx, "room-1", "m", true), context.Canceled)
	_, err := l.Key(ctx, "room-1", "k")
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.AckPending(ctx, "room-1", "m")
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, countRecords(t, l, keysBucket)+countRecords(t, l, acksBucket))
}

func TestClosedLedgerFailsWithErrClosed(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "a second Close does nothing")

	require.ErrorIs(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent), ErrClosed)
	require.ErrorIs(t, l.SetAckPending(ctx, "room-1", "m", true), ErrClosed)
	_, err := l.Key(ctx, "room-1", "k")
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.AckPending(ctx, "room-1", "m")
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Prune(ctx, l.now())
	require.ErrorIs(t, err, ErrClosed)
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

func TestConcurrentRooms(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	const rooms, messages = 8, 15
	var wg sync.WaitGroup
	for r := range rooms {
		room := fmt.Sprintf("room-%d", r)
		wg.Go(func() {
			for m := range messages {
				id := fmt.Sprintf("m%d", m)
				key := bandonce.DefaultKey(id)
				assert.NoError(t, l.SetKey(ctx, room, key, bandonce.KeyIntent))
				state, err := l.Key(ctx, room, key)
				assert.NoError(t, err)
				assert.Equal(t, bandonce.KeyIntent, state)
				assert.NoError(t, l.SetKey(ctx, room, key, bandonce.KeyAccepted))
				assert.NoError(t, l.SetAckPending(ctx, room, id, true))
				// Leave the last message's mark outstanding.
				if m < messages-1 {
					assert.NoError(t, l.SetAckPending(ctx, room, id, false))
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(rooms*(4*messages-1)), l.Stats().Syncs)
	require.NoError(t, l.Close())

	reopened := openAt(t, path)
	for r := range rooms {
		room := fmt.Sprintf("room-%d", r)
		for m := range messages {
			state, err := reopened.Key(ctx, room, bandonce.DefaultKey(fmt.Sprintf("m%d", m)))
			require.NoError(t, err)
			assert.Equal(t, bandonce.KeyAccepted, state)
		}
		pending, err := reopened.AckPending(ctx, room, fmt.Sprintf("m%d", messages-1))
		require.NoError(t, err)
		assert.True(t, pending)
	}
	assert.Equal(t, rooms, countRecords(t, reopened, acksBucket))
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
