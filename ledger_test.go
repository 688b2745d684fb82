package bandonce_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func TestMemoryLedgerStepsRoundTripAndAreCopied(t *testing.T) {
	ctx := context.Background()
	l := bandonce.NewMemoryLedger()
	_, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	assert.False(t, ok)

	result := []byte("ch_1")
	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "charge", result))
	result[0] = 'X' // the caller's buffer is not the record
	got, ok, err := l.Step(ctx, "room-1", "m1", "charge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "ch_1", string(got))
	got[0] = 'Y' // nor is the returned slice
	again, _, _ := l.Step(ctx, "room-1", "m1", "charge")
	assert.Equal(t, "ch_1", string(again))

	for _, other := range [][3]string{{"room-2", "m1", "charge"}, {"room-1", "m2", "charge"}, {"room-1", "m1", "refund"}} {
		_, ok, err := l.Step(ctx, other[0], other[1], other[2])
		require.NoError(t, err)
		assert.False(t, ok, "%v", other)
	}

	require.NoError(t, l.SetStep(ctx, "room-1", "m1", "empty", nil))
	_, ok, err = l.Step(ctx, "room-1", "m1", "empty")
	require.NoError(t, err)
	assert.True(t, ok, "an empty result is still a record")
}

func TestMemoryLedgerEvictsTheOldestStepsPastItsCap(t *testing.T) {
	ctx := context.Background()
	l := &bandonce.MemoryLedger{MaxKeysPerRoom: 3}
	for i := range 5 {
		require.NoError(t, l.SetStep(ctx, "room-1", fmt.Sprint("m", i), "s", []byte{byte(i)}))
	}
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyAccepted))
	for i := range 5 {
		_, ok, err := l.Step(ctx, "room-1", fmt.Sprint("m", i), "s")
		require.NoError(t, err)
		assert.Equal(t, i >= 2, ok, "step of m%d", i)
	}
	state, err := l.Key(ctx, "room-1", "k")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, state, "steps and keys have separate caps")
}
