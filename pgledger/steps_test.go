package pgledger

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStepRoundTripsAndOverwrites(t *testing.T) {
	ctx := context.Background()
	_, l := newLedger(t)
	_, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok, "no record yet")

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte(`{"id":"ch_1"}`)))
	got, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, `{"id":"ch_1"}`, string(got))

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("second\x00\xff")))
	got, _, err = l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.Equal(t, "second\x00\xff", string(got), "any bytes")
	assert.Equal(t, Stats{Reads: 3, Writes: 2}, l.Stats())
}

func TestAnEmptyStepResultIsRecorded(t *testing.T) {
	ctx := context.Background()
	_, l := newLedger(t)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "notify", nil))
	got, ok, err := l.Step(ctx, "room-1", "m1", "notify")
	require.NoError(t, err)
	assert.True(t, ok, "a step that returned nothing still ran")
	assert.Empty(t, got)
}

func TestStepsAreNamespacedPerAgentRoomMessageAndName(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	_, a := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	_, b := lead(t, db.open(t, db.opts("agent-other", "holder-b")))
	require.NoError(t, a.ledger.SetStep(ctx, "room-a", "m1", "charge", []byte("a")))
	require.NoError(t, a.ledger.SetStep(ctx, "room-a", "m", "1charge", []byte("b")))
	for _, tc := range []struct {
		ledger          *Ledger
		room, msg, name string
		want            string
		ok              bool
	}{
		{a.ledger, "room-a", "m1", "charge", "a", true},
		{a.ledger, "room-a", "m", "1charge", "b", true},
		{a.ledger, "room-b", "m1", "charge", "", false},
		{a.ledger, "room-a", "m2", "charge", "", false},
		{a.ledger, "room-a", "m1", "refund", "", false},
		{b.ledger, "room-a", "m1", "charge", "", false}, // another agent's
	} {
		got, ok, err := tc.ledger.Step(ctx, tc.room, tc.msg, tc.name)
		require.NoError(t, err)
		assert.Equal(t, tc.ok, ok, "%s %s %s", tc.room, tc.msg, tc.name)
		assert.Equal(t, tc.want, string(got), "%s %s %s", tc.room, tc.msg, tc.name)
	}
}

// The result is committed when SetStep returns: another connection reads it.
func TestStepIsCommittedBeforeSetStepReturns(t *testing.T) {
	ctx := context.Background()
	db, l := newLedger(t)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
	var result []byte
	require.NoError(t, newPool(t, db.dsn).QueryRow(ctx, `SELECT result FROM `+db.schema+`.steps WHERE agent_id = $1 AND room = 'room-1' AND message_id = 'm1' AND name = 'charge'`, testAgent).Scan(&result))
	assert.Equal(t, "ch_1", string(result))
}

// A holder that lost its lease records no step: the next holder runs it
// again, with the same idempotency key, instead of trusting a result it
// cannot know was the one the effect had.
func TestAStepOfAFormerHolderIsFenced(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	first, a := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	first.stop()
	require.NoError(t, first.wait(t))
	_, b := lead(t, db.open(t, db.opts(testAgent, "holder-b")))

	require.ErrorIs(t, a.ledger.SetStep(ctx, "room-1", "m1", "charge", []byte("stale")), ErrFenced)
	_, ok, err := b.ledger.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, b.ledger.SetStep(ctx, "room-1", "m1", "charge", []byte("fresh")))
}

// A schema made by a build before steps existed is migrated by Open: its
// records stay, and the journal is there.
func TestOpenMigratesASchemaFromBeforeSteps(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	db.exec(t, `CREATE SCHEMA {s}; CREATE TABLE {s}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	db.exec(t, migrations[0].sql(db.schema))
	db.exec(t, `INSERT INTO {s}.migrations (version, name) VALUES (1, $1)`, migrations[0].name)
	db.exec(t, `INSERT INTO {s}.keys VALUES ($1, 'room-1', 'k', 2, 1, now())`, testAgent)

	_, tm := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	assert.Equal(t, len(migrations), db.count(t, `SELECT count(*) FROM {s}.migrations`))
	got, err := tm.ledger.Key(ctx, "room-1", "k")
	require.NoError(t, err)
	assert.Equal(t, "accepted", got.String(), "the records stay")
	require.NoError(t, tm.ledger.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
}
