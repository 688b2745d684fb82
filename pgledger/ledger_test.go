package pgledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// newLedger opens testAgent's store in a fresh schema and leads with it.
func newLedger(t *testing.T) (*testDB, *Ledger) {
	t.Helper()
	db := newTestDB(t)
	_, tm := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	return db, tm.ledger
}

func TestKeyRoundTripsEveryState(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	for _, state := range []bandonce.KeyState{
		bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped, bandonce.KeyIntent, bandonce.KeyUnknown,
	} {
		require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", state))
		got, err := l.Key(ctx, "room-1", "msg:1")
		require.NoError(t, err)
		assert.Equal(t, state, got)
	}
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.keys`), "KeyUnknown deletes the record")
	require.NoError(t, l.SetKey(ctx, "room-1", "never-set", bandonce.KeyUnknown), "deleting what is not there is no error")
}

func TestKeyOfAnUnseenKeyIsUnknown(t *testing.T) {
	_, l := newLedger(t)
	got, err := l.Key(context.Background(), "room-1", "never-set")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyUnknown, got)
	assert.True(t, l.Durable())
}

func TestAckPendingRoundTripsAndDoneDeletes(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	pending, err := l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.False(t, pending)

	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", true))
	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", true), "setting twice is no error")
	pending, err = l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.True(t, pending)

	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", false))
	pending, err = l.AckPending(ctx, "room-1", "m1")
	require.NoError(t, err)
	assert.False(t, pending)
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.acks`), "done messages take no room")
}

func TestRecordsAreNamespacedPerRoomAndAgent(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	_, a := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	_, b := lead(t, db.open(t, db.opts("agent-other", "holder-b")))
	require.NoError(t, a.ledger.SetKey(ctx, "room-a", "k", bandonce.KeyAccepted))
	require.NoError(t, a.ledger.SetKey(ctx, "ab", "c", bandonce.KeyIntent))
	require.NoError(t, a.ledger.SetAckPending(ctx, "room-a", "m", true))

	for _, tc := range []struct {
		ledger    *Ledger
		room, key string
		want      bandonce.KeyState
	}{
		{a.ledger, "room-a", "k", bandonce.KeyAccepted},
		{a.ledger, "room-b", "k", bandonce.KeyUnknown},
		{a.ledger, "ab", "c", bandonce.KeyIntent},
		{a.ledger, "a", "bc", bandonce.KeyUnknown},
		{b.ledger, "room-a", "k", bandonce.KeyUnknown}, // another agent's
		{b.ledger, "ab", "c", bandonce.KeyUnknown},
	} {
		got, err := tc.ledger.Key(ctx, tc.room, tc.key)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "agent %q room %q key %q", tc.ledger.lease.agent, tc.room, tc.key)
	}
	for _, l := range []*Ledger{a.ledger, b.ledger} {
		pending, err := l.AckPending(ctx, "room-b", "m")
		require.NoError(t, err)
		assert.False(t, pending)
	}
	pending, err := b.ledger.AckPending(ctx, "room-a", "m")
	require.NoError(t, err)
	assert.False(t, pending, "another agent's ack-pending record")
	assert.Equal(t, int64(1), a.ledger.Epoch())
	assert.Equal(t, int64(1), b.ledger.Epoch(), "each agent has a lease of its own")
}

// What one holder wrote, the next one reads: the ledger is the
// database's, not the process's.
func TestTheNextHolderReadsEverything(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	first, tm := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	want := map[[2]string]bandonce.KeyState{}
	states := []bandonce.KeyState{bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped}
	for r := range 3 {
		room := fmt.Sprintf("room-%d", r)
		for k := range 20 {
			key := fmt.Sprintf("key-%d", k)
			state := states[(r+k)%len(states)]
			require.NoError(t, tm.ledger.SetKey(ctx, room, key, state))
			want[[2]string{room, key}] = state
		}
		require.NoError(t, tm.ledger.SetAckPending(ctx, room, "pending", true))
		require.NoError(t, tm.ledger.SetAckPending(ctx, room, "done", true))
		require.NoError(t, tm.ledger.SetAckPending(ctx, room, "done", false))
	}
	assert.Equal(t, Stats{Writes: 60 + 9}, tm.ledger.Stats())
	first.stop()
	require.NoError(t, first.wait(t))

	// Another process, its own pool.
	other := &testDB{dsn: db.dsn, pool: newPool(t, db.dsn), schema: db.schema}
	_, next := lead(t, other.open(t, db.opts(testAgent, "holder-b")))
	assert.Equal(t, int64(2), next.ledger.Epoch())
	for rk, state := range want {
		got, err := next.ledger.Key(ctx, rk[0], rk[1])
		require.NoError(t, err)
		assert.Equal(t, state, got, "room %q key %q", rk[0], rk[1])
	}
	for r := range 3 {
		pending, err := next.ledger.AckPending(ctx, fmt.Sprintf("room-%d", r), "pending")
		require.NoError(t, err)
		assert.True(t, pending)
		done, err := next.ledger.AckPending(ctx, fmt.Sprintf("room-%d", r), "done")
		require.NoError(t, err)
		assert.False(t, done)
	}
	assert.Equal(t, Stats{Reads: 60 + 6}, next.ledger.Stats())
}

// The intent must be committed when SetKey returns: another connection,
// which sees only committed rows, reads it at once.
func TestIntentIsCommittedBeforeSetKeyReturns(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	observer := newPool(t, db.dsn)
	for i := range 20 {
		key := fmt.Sprintf("msg:%d", i)
		require.NoError(t, l.SetKey(ctx, "room-1", key, bandonce.KeyIntent))
		var state int
		require.NoError(t, observer.QueryRow(ctx, `SELECT state FROM `+db.schema+`.keys WHERE agent_id = $1 AND room = $2 AND key = $3`,
			testAgent, "room-1", key).Scan(&state))
		assert.Equal(t, int(bandonce.KeyIntent), state)
	}
}

func TestSetKeyRejectsStatesThatAreNotKeyStates(t *testing.T) {
	_, l := newLedger(t)
	for _, state := range []bandonce.KeyState{-1, 4, 257} {
		err := l.SetKey(context.Background(), "room-1", "k", state)
		require.ErrorIs(t, err, ErrInvalidState, "state %d", state)
	}
	assert.Zero(t, l.Stats().Writes, "nothing was sent")
}

func TestCancelledContextWritesNothing(t *testing.T) {
	db, l := newLedger(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent), context.Canceled)
	require.ErrorIs(t, l.SetAckPending(ctx, "room-1", "m", true), context.Canceled)
	_, err := l.Key(ctx, "room-1", "k")
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.AckPending(ctx, "room-1", "m")
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, db.count(t, `SELECT (SELECT count(*) FROM {s}.keys) + (SELECT count(*) FROM {s}.acks)`))
}

// Keys PostgreSQL cannot store (a NUL byte, invalid UTF-8, too long for
// an index entry) are errors from the call, and the ledger stays usable.
func TestUnstorableKeysAreErrorsNotPanics(t *testing.T) {
	ctx := context.Background()
	_, l := newLedger(t)
	for name, key := range map[string]string{
		"NUL byte":     "msg\x00:1",
		"invalid UTF8": "msg:\xff",
		"huge":         strings.Repeat("k", 1<<20),
	} {
		err := l.SetKey(ctx, "room-1", key, bandonce.KeyIntent)
		var pg *pgconn.PgError
		require.ErrorAs(t, err, &pg, name)
		assert.Contains(t, err.Error(), "room-1", name)
	}
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent))
	got, err := l.Key(ctx, "room-1", "k")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyIntent, got)
}

// A row no write of this package makes (the CHECK constraint dropped by
// hand) is reported, not taken for a state.
func TestAForeignStateIsReportedNotTrusted(t *testing.T) {
	db, l := newLedger(t)
	db.exec(t, `ALTER TABLE {s}.keys DROP CONSTRAINT keys_state_check`)
	db.exec(t, `INSERT INTO {s}.keys VALUES ($1, 'room-1', 'odd', 9, 1, now())`, testAgent)
	_, err := l.Key(context.Background(), "room-1", "odd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds state 9, not a key state")
}

func TestConcurrentRooms(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	const rooms, messages = 8, 10
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
				if m < messages-1 { // leave the last mark outstanding
					assert.NoError(t, l.SetAckPending(ctx, room, id, false))
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, Stats{Reads: rooms * messages, Writes: rooms * (4*messages - 1)}, l.Stats())
	assert.Equal(t, rooms*messages, db.count(t, `SELECT count(*) FROM {s}.keys WHERE state = 2`))
	assert.Equal(t, rooms, db.count(t, `SELECT count(*) FROM {s}.acks`))
}
