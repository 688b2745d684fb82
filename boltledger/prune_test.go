package boltledger

import (
	"context"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPruneDeletesOnlyInRoomKeysAckAndStepRecordsBeforeTheCutoff(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	clock := &fixedClock{at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l.now = clock.now

	require.NoError(t, l.SetKey(ctx, "room-1", "old-intent", bandonce.KeyIntent))
	require.NoError(t, l.SetKey(ctx, "room-1", "old-accepted", bandonce.KeyAccepted))
	require.NoError(t, l.SetKey(ctx, "room-2", "old-dropped", bandonce.KeyDuplicateDropped))
	require.NoError(t, l.SetAckPending(ctx, "room-1", "old-ack", true))
	require.NoError(t, l.SetStep(ctx, "room-1", "old-msg", "charge", []byte("old")))
	cutoff := clock.at.Add(time.Hour)
	clock.at = cutoff // written at the cutoff: not before it
	require.NoError(t, l.SetKey(ctx, "room-1", "new-accepted", bandonce.KeyAccepted))
	require.NoError(t, l.SetAckPending(ctx, "room-2", "new-ack", true))
	require.NoError(t, l.SetStep(ctx, "room-1", "new-msg", "charge", []byte("new")))

	removed, err := l.Prune(ctx, cutoff)
	require.NoError(t, err)
	assert.Equal(t, 4, removed)
	_, ok, err := l.Step(ctx, "room-1", "old-msg", "charge")
	require.NoError(t, err)
	assert.False(t, ok, "the old step was pruned")
	result, ok, err := l.Step(ctx, "room-1", "new-msg", "charge")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "new", string(result))

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
	pending, err := l.AckPending(ctx, "room-1", "old-ack")
	require.NoError(t, err)
	assert.False(t, pending)
	pending, err = l.AckPending(ctx, "room-2", "new-ack")
	require.NoError(t, err)
	assert.True(t, pending)
}

func TestPruneWithNothingToDeleteCommitsNothing(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent))
	before := l.Stats()
	removed, err := l.Prune(ctx, l.now().Add(time.Hour))
	require.NoError(t, err)
	assert.Zero(t, removed, "intents are never pruned")
	assert.Equal(t, before, l.Stats())
}
