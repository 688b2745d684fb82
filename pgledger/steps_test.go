package pgledger

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A holder that lost its lease records no step: the next holder runs it
// again, with the same idempotency key, instead of trusting a result it
// cannot know was the one the effect had.
func TestAStepOfAFormerHolderIsFenced(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	first, a := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	first.stop()
	require.NoError(t, first.wait(t))
	_, b := lead(t, db.open(t, db.steadyOpts(testAgent, "holder-b")))

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

	_, tm := lead(t, db.open(t, db.steadyOpts(testAgent, "holder-a")))
	assert.Equal(t, len(migrations), db.count(t, `SELECT count(*) FROM {s}.migrations`))
	got, err := tm.ledger.Key(ctx, "room-1", "k")
	require.NoError(t, err)
	assert.Equal(t, "accepted", got.String(), "the records stay")
	require.NoError(t, tm.ledger.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
}
