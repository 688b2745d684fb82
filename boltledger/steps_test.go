package boltledger

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestStepRoundTripsAndOverwrites(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	_, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok, "no record yet")

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte(`{"id":"ch_1"}`)))
	got, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, `{"id":"ch_1"}`, string(got))

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("second")))
	got, _, err = l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.Equal(t, "second", string(got))
}

func TestAnEmptyStepResultIsRecorded(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "notify", nil))
	got, ok, err := l.Step(ctx, "room-1", "m1", "notify")
	require.NoError(t, err)
	assert.True(t, ok, "a step that returned nothing still ran")
	assert.Empty(t, got)
}

func TestStepsAreNamespacedPerRoomMessageAndName(t *testing.T) {
	ctx := context.Background()
	l, _ := openNew(t)
	require.NoError(t, l.SetStep(ctx, "room-a", "m1", "charge", []byte("a")))
	require.NoError(t, l.SetStep(ctx, "room-a", "m", "1charge", []byte("b")))
	for _, tc := range []struct {
		room, msg, name string
		want            string
		ok              bool
	}{
		{"room-a", "m1", "charge", "a", true},
		{"room-a", "m", "1charge", "b", true}, // the same bytes joined
		{"room-b", "m1", "charge", "", false},
		{"room-a", "m2", "charge", "", false},
		{"room-a", "m1", "refund", "", false},
	} {
		got, ok, err := l.Step(ctx, tc.room, tc.msg, tc.name)
		require.NoError(t, err)
		assert.Equal(t, tc.ok, ok, "%+v", tc)
		assert.Equal(t, tc.want, string(got), "%+v", tc)
	}
}

// The result must be in the file, committed, when SetStep returns: a copy
// of the file taken at that moment, as a crash would leave it, has it.
func TestStepIsCommittedBeforeSetStepReturns(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
	assert.Equal(t, int64(1), l.Stats().Syncs)

	snapshot, err := os.ReadFile(path)
	require.NoError(t, err)
	copyPath := path + ".crash-copy"
	require.NoError(t, os.WriteFile(copyPath, snapshot, 0o600))
	crashed := openAt(t, copyPath)
	got, ok, err := crashed.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "ch_1", string(got))
}

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

func TestStepCallsFailOnACancelledContextOrAClosedLedger(t *testing.T) {
	l, _ := openNew(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.SetStep(ctx, "room-1", "m1", "s", nil), context.Canceled)
	_, _, err := l.Step(ctx, "room-1", "m1", "s")
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, countRecords(t, l, stepsBucket))

	require.NoError(t, l.Close())
	require.ErrorIs(t, l.SetStep(context.Background(), "room-1", "m1", "s", nil), ErrClosed)
	_, _, err = l.Step(context.Background(), "room-1", "m1", "s")
	require.ErrorIs(t, err, ErrClosed)
}

func TestReopenKeepsSteps(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", []byte("ch_1")))
	require.NoError(t, l.Close())
	l = openAt(t, path)
	got, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "ch_1", string(got))
}
