package bandonce_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/ledgertest"
)

// MemoryLedger is not durable: the suite judges it without a reopen.
func TestMemoryLedgerKeepsTheContract(t *testing.T) {
	t.Run("NewMemoryLedger", func(t *testing.T) {
		ledgertest.Run(t, func(*testing.T) bandonce.Ledger { return bandonce.NewMemoryLedger() }, nil)
	})
	t.Run("zero value", func(t *testing.T) {
		ledgertest.Run(t, func(*testing.T) bandonce.Ledger { return &bandonce.MemoryLedger{} }, nil)
	})
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

func TestMemoryLedgerEvictsTheOldestKeysPastItsCapButNoAckPendingRecord(t *testing.T) {
	ctx := context.Background()
	l := &bandonce.MemoryLedger{MaxKeysPerRoom: 3}
	for i := range 5 {
		id := fmt.Sprint("m", i)
		require.NoError(t, l.SetAckPending(ctx, "room-1", id, true))
		require.NoError(t, l.SetKey(ctx, "room-1", bandonce.DefaultKey(id), bandonce.KeyAccepted))
	}
	require.NoError(t, l.SetKey(ctx, "room-1", bandonce.DefaultKey("m2"), bandonce.KeyIntent))
	require.NoError(t, l.SetKey(ctx, "room-2", "k", bandonce.KeyAccepted))
	for i, want := range []bandonce.KeyState{bandonce.KeyUnknown, bandonce.KeyUnknown, bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyAccepted} {
		id := fmt.Sprint("m", i)
		state, err := l.Key(ctx, "room-1", bandonce.DefaultKey(id))
		require.NoError(t, err)
		assert.Equal(t, want, state, "key of %s: the cap counts first writes, and a rewrite keeps its place", id)
		pending, err := l.AckPending(ctx, "room-1", id)
		require.NoError(t, err)
		assert.True(t, pending, "ack-pending records are never evicted")
	}
	state, err := l.Key(ctx, "room-2", "k")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, state, "each room has its own cap")
}
