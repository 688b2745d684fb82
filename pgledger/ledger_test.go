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
	"github.com/band-once/bandonce/ledgertest"
)

// newLedger opens testAgent's store in a fresh schema and leads with it.
func newLedger(t *testing.T) (*testDB, *Ledger) {
	t.Helper()
	db := newTestDB(t)
	_, tm := lead(t, db.open(t, db.steadyOpts(testAgent, "holder-a")))
	return db, tm.ledger
}

// The bandonce.Ledger contract. A reopen is the next holder: the leader
// stops (releasing its lease, which writes no record) and another process,
// with its own pool and Store, leads with the next epoch.
func TestLedgerKeepsTheContract(t *testing.T) {
	testDSN(t) // skips once, saying why, without a database
	type holder struct {
		db     *testDB
		leader *leader
	}
	holders := map[*Ledger]holder{}
	// The contract is not about the lease (a handover releases it).
	opts := func(db *testDB, holder string) Options { return db.steadyOpts(testAgent, holder) }
	ledgertest.Run(t,
		func(t *testing.T) bandonce.Ledger {
			db := newTestDB(t)
			ld, tm := lead(t, db.open(t, opts(db, "holder-a")))
			holders[tm.ledger] = holder{db, ld}
			return tm.ledger
		},
		func(t *testing.T, l bandonce.Ledger) bandonce.Ledger {
			was := holders[l.(*Ledger)]
			was.leader.stop()
			require.NoError(t, was.leader.wait(t))
			other := &testDB{dsn: was.db.dsn, pool: newPool(t, was.db.dsn), schema: was.db.schema}
			ld, tm := lead(t, other.open(t, opts(other, "holder-b")))
			assert.Equal(t, l.(*Ledger).Epoch()+1, tm.ledger.Epoch(), "the next holder's epoch")
			holders[tm.ledger] = holder{was.db, ld}
			return tm.ledger
		})
}

// Stronger than the suite's reopen: a write is committed when it returns,
// so another connection reads it while its writer still leads.
func TestWritesAreVisibleToOtherConnectionsWhenTheyReturn(t *testing.T) {
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
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
	var result []byte
	require.NoError(t, observer.QueryRow(ctx, `SELECT result FROM `+db.schema+`.steps WHERE agent_id = $1 AND room = 'room-1' AND message_id = 'm1' AND name = 'charge'`, testAgent).Scan(&result))
	assert.Equal(t, "ch_1", string(result))
}

// Agents share the tables, never their records nor their leases.
func TestRecordsAreNamespacedPerAgent(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	_, a := lead(t, db.open(t, db.steadyOpts(testAgent, "holder-a")))
	_, b := lead(t, db.open(t, db.steadyOpts("agent-other", "holder-b")))
	require.NoError(t, a.ledger.SetKey(ctx, "room-a", "k", bandonce.KeyAccepted))
	require.NoError(t, a.ledger.SetAckPending(ctx, "room-a", "m", true))
	require.NoError(t, a.ledger.SetStep(ctx, "room-a", "m1", "charge", []byte("a")))

	state, err := b.ledger.Key(ctx, "room-a", "k")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyUnknown, state, "another agent's key")
	pending, err := b.ledger.AckPending(ctx, "room-a", "m")
	require.NoError(t, err)
	assert.False(t, pending, "another agent's ack-pending record")
	_, ok, err := b.ledger.Step(ctx, "room-a", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok, "another agent's step")
	assert.Equal(t, int64(1), a.ledger.Epoch())
	assert.Equal(t, int64(1), b.ledger.Epoch(), "each agent has a lease of its own")
}

// KeyUnknown and a cleared ack-pending record delete their rows, so
// finished messages take no room.
func TestDeletionsLeaveNoRow(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", bandonce.KeyAccepted))
	require.NoError(t, l.SetKey(ctx, "room-1", "msg:1", bandonce.KeyUnknown))
	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", true))
	require.NoError(t, l.SetAckPending(ctx, "room-1", "m1", false))
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.keys`), "KeyUnknown deletes the record")
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.acks`), "done messages take no room")
}

// Stats count every statement, from many rooms at once too, and each
// Ledger counts its own.
func TestStatsCountEveryStatement(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	first, tm := lead(t, db.open(t, db.steadyOpts(testAgent, "holder-a")))
	l := tm.ledger
	const rooms, messages = 8, 10
	var wg sync.WaitGroup
	for r := range rooms {
		room := fmt.Sprintf("room-%d", r)
		wg.Go(func() {
			for m := range messages {
				id := fmt.Sprintf("m%d", m)
				assert.NoError(t, l.SetKey(ctx, room, bandonce.DefaultKey(id), bandonce.KeyIntent))
				_, err := l.Key(ctx, room, bandonce.DefaultKey(id))
				assert.NoError(t, err)
				assert.NoError(t, l.SetKey(ctx, room, bandonce.DefaultKey(id), bandonce.KeyAccepted))
				assert.NoError(t, l.SetAckPending(ctx, room, id, true))
				if m < messages-1 {
					assert.NoError(t, l.SetAckPending(ctx, room, id, false))
				}
			}
		})
	}
	wg.Wait()
	want := Stats{Reads: rooms * messages, Writes: rooms * (4*messages - 1)}
	assert.Equal(t, want, l.Stats())
	assert.Equal(t, rooms*messages, db.count(t, `SELECT count(*) FROM {s}.keys WHERE state = 2`))
	assert.Equal(t, rooms, db.count(t, `SELECT count(*) FROM {s}.acks`))

	require.NoError(t, l.SetStep(ctx, "room-0", "m0", "charge", []byte("ch_1")))
	_, _, err := l.Step(ctx, "room-0", "m0", "charge")
	require.NoError(t, err)
	_, err = l.AckPending(ctx, "room-0", "m0")
	require.NoError(t, err)
	want.Reads, want.Writes = want.Reads+2, want.Writes+1
	assert.Equal(t, want, l.Stats(), "Step and AckPending are reads, SetStep a write")

	first.stop()
	require.NoError(t, first.wait(t))
	_, next := lead(t, db.open(t, db.opts(testAgent, "holder-b")))
	assert.Equal(t, Stats{}, next.ledger.Stats())
	_, err = next.ledger.Key(ctx, "room-0", "k")
	require.NoError(t, err)
	assert.Equal(t, Stats{Reads: 1}, next.ledger.Stats())
}

// The suite lets a ledger either honour an ended context or ignore it;
// this one refuses every call and writes nothing.
func TestCancelledContextWritesNothing(t *testing.T) {
	db, l := newLedger(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, keyErr := l.Key(ctx, "room-1", "k")
	_, ackErr := l.AckPending(ctx, "room-1", "m")
	_, _, stepErr := l.Step(ctx, "room-1", "m", "s")
	for call, err := range map[string]error{
		"SetKey":        l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent),
		"SetAckPending": l.SetAckPending(ctx, "room-1", "m", true),
		"SetStep":       l.SetStep(ctx, "room-1", "m", "s", nil),
		"Key":           keyErr,
		"AckPending":    ackErr,
		"Step":          stepErr,
	} {
		assert.ErrorIs(t, err, context.Canceled, call)
	}
	assert.Zero(t, db.count(t, `SELECT (SELECT count(*) FROM {s}.keys) + (SELECT count(*) FROM {s}.acks) + (SELECT count(*) FROM {s}.steps)`))
}

func TestSetKeyRejectsStatesThatAreNotKeyStates(t *testing.T) {
	_, l := newLedger(t)
	for _, state := range []bandonce.KeyState{-1, 4, 257} {
		err := l.SetKey(context.Background(), "room-1", "k", state)
		require.ErrorIs(t, err, ErrInvalidState, "state %d", state)
	}
	assert.Zero(t, l.Stats().Writes, "nothing was sent")
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
