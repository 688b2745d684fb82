package bandonce_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
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

// A MemoryLedger is one agent's: a second agent's shell given the same one
// is refused at start, with nothing sent, rather than taking the first
// agent's records for its own and leaving its messages unanswered. The
// first agent's next life binds it again.
func TestAMemoryLedgerServesOneAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 0)
		bob := w.band.AddAgent("bob")
		room := w.band.AddRoom("shared", w.human, w.agent.ID, bob.ID)
		id, err := w.band.Say(room.ID, w.human.ID, "hello both", w.agent.ID, bob.ID)
		require.NoError(t, err)
		ledger := bandonce.NewMemoryLedger()
		cfgA := w.config(echo)
		cfgA.Ledger = ledger
		stopA := w.start(cfgA)
		runFor(5 * time.Second)

		cfgB := w.config(echo)
		cfgB.APIKey, cfgB.Ledger = bob.Key, ledger
		b, err := bandonce.New(cfgB)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // without the refusal, bob would serve
		defer cancel()
		require.ErrorIs(t, b.Run(ctx), bandonce.ErrAgentMismatch)
		require.NoError(t, stopA())
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "only the ledger's agent answered")
		assert.NotEqual(t, fakeband.StatusProcessed, w.band.Status(bob.ID, id), "bob's message waits for a ledger of bob's")

		stopA = w.start(cfgA)
		runFor(time.Second)
		require.NoError(t, stopA())
	})
}
