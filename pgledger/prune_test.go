package pgledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func TestPruneDeletesOnlyInRoomKeysAckAndStepRecordsBeforeTheCutoff(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	s := db.open(t, db.steadyOpts(testAgent, "holder-a"))
	_, tm := lead(t, s)
	_, other := lead(t, db.open(t, db.steadyOpts("agent-other", "holder-b")))
	l := tm.ledger

	require.NoError(t, l.SetKey(ctx, "room-1", "old-intent", bandonce.KeyIntent))
	require.NoError(t, l.SetKey(ctx, "room-1", "old-accepted", bandonce.KeyAccepted))
	require.NoError(t, l.SetKey(ctx, "room-2", "old-dropped", bandonce.KeyDuplicateDropped))
	require.NoError(t, l.SetAckPending(ctx, "room-1", "old-ack", true))
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "old-step", []byte("x")))
	require.NoError(t, other.ledger.SetKey(ctx, "room-1", "old-accepted", bandonce.KeyAccepted))
	db.exec(t, `UPDATE {s}.keys SET written_at = now() - interval '2 hours'`)
	db.exec(t, `UPDATE {s}.acks SET written_at = now() - interval '2 hours'`)
	db.exec(t, `UPDATE {s}.steps SET written_at = now() - interval '2 hours'`)
	require.NoError(t, l.SetKey(ctx, "room-1", "new-accepted", bandonce.KeyAccepted))
	require.NoError(t, l.SetAckPending(ctx, "room-2", "new-ack", true))
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "new-step", []byte("y")))

	removed, err := s.Prune(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(4), removed)

	for key, want := range map[string]bandonce.KeyState{
		"old-intent":   bandonce.KeyIntent,
		"old-accepted": bandonce.KeyUnknown,
		"new-accepted": bandonce.KeyAccepted,
	} {
		got, err := l.Key(ctx, "room-1", key)
		require.NoError(t, err)
		assert.Equal(t, want, got, key)
	}
	got, err := l.Key(ctx, "room-2", "old-dropped")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyUnknown, got)
	got, err = other.ledger.Key(ctx, "room-1", "old-accepted")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, got, "another agent's records are its own to prune")
	pending, err := l.AckPending(ctx, "room-1", "old-ack")
	require.NoError(t, err)
	assert.False(t, pending)
	pending, err = l.AckPending(ctx, "room-2", "new-ack")
	require.NoError(t, err)
	assert.True(t, pending)
	_, ok, err := l.Step(ctx, "room-1", "m1", "old-step")
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = l.Step(ctx, "room-1", "m1", "new-step")
	require.NoError(t, err)
	assert.True(t, ok)

	removed, err = s.Prune(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.Zero(t, removed, "nothing left to prune")
}

// A backlog larger than a batch is pruned batch after batch, each a
// statement of its own within the call timeout, so that however large it
// grew, Prune ends it; what is newer than the cutoff stays.
func TestPruneDeletesABacklogOfManyBatches(t *testing.T) {
	ctx := context.Background()
	old := pruneBatchRows
	pruneBatchRows = 3
	t.Cleanup(func() { pruneBatchRows = old })
	db := newTestDB(t)
	s := db.open(t, db.steadyOpts(testAgent, "holder-a"))
	_, tm := lead(t, s)
	l := tm.ledger
	for i := range 10 {
		require.NoError(t, l.SetKey(ctx, "room-1", fmt.Sprintf("old-%d", i), bandonce.KeyAccepted))
	}
	for i := range 7 {
		require.NoError(t, l.SetAckPending(ctx, "room-1", fmt.Sprintf("old-ack-%d", i), true))
	}
	for i := range 5 {
		require.NoError(t, l.SetStep(ctx, "room-1", "m1", fmt.Sprintf("old-step-%d", i), []byte("x")))
	}
	db.exec(t, `UPDATE {s}.keys SET written_at = now() - interval '2 hours'`)
	db.exec(t, `UPDATE {s}.acks SET written_at = now() - interval '2 hours'`)
	db.exec(t, `UPDATE {s}.steps SET written_at = now() - interval '2 hours'`)
	require.NoError(t, l.SetKey(ctx, "room-1", "new", bandonce.KeyAccepted))

	removed, err := s.Prune(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(22), removed)
	for _, table := range []string{"keys", "acks", "steps"} {
		assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.`+table+` WHERE written_at < now() - interval '1 hour'`), table)
	}
	got, err := l.Key(ctx, "room-1", "new")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, got)
}
