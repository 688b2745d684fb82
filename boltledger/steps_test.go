package boltledger

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A ledger written before steps existed has no steps bucket: it opens,
// reads no step, and takes its first step.
func TestALedgerWithoutTheStepsBucketGainsItOnTheFirstStep(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(stepsBucket) }))
	require.NoError(t, l.Close())

	l = openAt(t, path)
	_, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok)
	removed, err := l.Prune(ctx, l.now().Add(time.Hour))
	require.NoError(t, err)
	assert.Zero(t, removed)

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("x")))
	got, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "x", string(got))
}

func TestDamagedStepRecordIsReportedAsCorrupt(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stepsBucket).Put(stepKey("room-1", "m1", "short"), []byte{stepTag, 0})
	}))
	_, _, err := l.Step(ctx, "room-1", "m1", "short")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = l.Prune(ctx, l.now().Add(time.Hour))
	require.ErrorIs(t, err, ErrCorrupt)
}
