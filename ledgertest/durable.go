package ledgertest

import (
	"fmt"
	"sync"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// durableChecks hold a ledger to what Durable() says: the checks that
// reopen it run only when Run is given a reopen, which a durable ledger
// must be.
var durableChecks = []check{
	{name: "SaysWhatItPromises", run: func(t tester, s *session) {
		l := s.open()
		durable := l.Durable()
		switch {
		case durable && s.reopen == nil:
			t.Errorf("Durable() is true, but no reopen was given: a durable ledger's promise is what a reopen finds, so the suite must reopen it")
		case !durable && s.reopen != nil:
			t.Errorf("Durable() is false, so the ledger promises nothing across a reopen: give no reopen")
		}
		require.NoError(t, l.SetKey(s.ctx, "room-1", "k", bandonce.KeyIntent))
		assert.Equal(t, durable, l.Durable(), "Durable() changed after a write")
	}},
	{name: "AnIntentWhenSetKeyReturns", needsReopen: true, run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetKey(s.ctx, "room-1", "msg:1", bandonce.KeyIntent))
		l = s.reopen(l)
		// The post the intent protects follows SetKey at once.
		assertKey(t, s.ctx, l, "room-1", "msg:1", bandonce.KeyIntent)
	}},
	{name: "AStepWhenSetStepReturns", needsReopen: true, run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetStep(s.ctx, "room-1", "m1", "charge", []byte("ch_1")))
		l = s.reopen(l)
		// The shell hands the result to the handler once SetStep returns.
		assertStep(t, s.ctx, l, "room-1", "m1", "charge", "ch_1")
	}},
	{name: "EverythingAcrossReopens", needsReopen: true, run: func(t tester, s *session) {
		l := s.open()
		keys := map[[2]string]bandonce.KeyState{}
		states := []bandonce.KeyState{bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped}
		for r := range 3 {
			room := fmt.Sprintf("room-%d", r)
			for k := range 30 {
				key := fmt.Sprintf("key-%d", k)
				keys[[2]string{room, key}] = states[(r+k)%len(states)]
				require.NoError(t, l.SetKey(s.ctx, room, key, keys[[2]string{room, key}]))
			}
			require.NoError(t, l.SetKey(s.ctx, room, "forgotten", bandonce.KeyAccepted))
			require.NoError(t, l.SetKey(s.ctx, room, "forgotten", bandonce.KeyUnknown))
			require.NoError(t, l.SetAckPending(s.ctx, room, "pending", true))
			require.NoError(t, l.SetAckPending(s.ctx, room, "done", true))
			require.NoError(t, l.SetAckPending(s.ctx, room, "done", false))
			require.NoError(t, l.SetStep(s.ctx, room, "m1", "charge", []byte("ch_"+room)))
			require.NoError(t, l.SetStep(s.ctx, room, "m1", "refund", []byte("first")))
			require.NoError(t, l.SetStep(s.ctx, room, "m1", "refund", []byte("second")))
			require.NoError(t, l.SetStep(s.ctx, room, "m1", "notify", nil))
		}
		verify := func(l bandonce.Ledger) {
			t.Helper()
			assert.True(t, l.Durable(), "Durable() of the reopened ledger")
			for rk, state := range keys {
				assertKey(t, s.ctx, l, rk[0], rk[1], state)
			}
			for r := range 3 {
				room := fmt.Sprintf("room-%d", r)
				assertKey(t, s.ctx, l, room, "forgotten", bandonce.KeyUnknown)
				assertAck(t, s.ctx, l, room, "pending", true)
				assertAck(t, s.ctx, l, room, "done", false)
				assertStep(t, s.ctx, l, room, "m1", "charge", "ch_"+room)
				assertStep(t, s.ctx, l, room, "m1", "refund", "second")
				assertStep(t, s.ctx, l, room, "m1", "notify", "")
				assertNoStep(t, s.ctx, l, room, "m2", "charge")
			}
		}
		l = s.reopen(l)
		verify(l)

		// The reopened ledger takes writes, and they survive the next reopen.
		require.NoError(t, l.SetKey(s.ctx, "room-0", "key-0", bandonce.KeyAccepted))
		require.NoError(t, l.SetAckPending(s.ctx, "room-0", "pending", false))
		keys[[2]string{"room-0", "key-0"}] = bandonce.KeyAccepted
		l = s.reopen(l)
		assertKey(t, s.ctx, l, "room-0", "key-0", bandonce.KeyAccepted)
		assertAck(t, s.ctx, l, "room-0", "pending", false)
		assertStep(t, s.ctx, l, "room-1", "m1", "refund", "second")
	}},
}

// concurrencyChecks call the ledger as the shell does: one goroutine a
// room, all at once.
var concurrencyChecks = []check{
	{name: "OneGoroutineARoom", run: func(t tester, s *session) {
		l := s.open()
		const rooms, messages = 8, 10
		var wg sync.WaitGroup
		for r := range rooms {
			room := fmt.Sprintf("room-%d", r)
			wg.Go(func() {
				// As the shell handles one message; assert, not require:
				// FailNow must not be called off the check's goroutine.
				defer failOnPanic(t, room)
				for m := range messages {
					id := fmt.Sprintf("m%d", m)
					key := bandonce.DefaultKey(id)
					assert.NoError(t, l.SetKey(s.ctx, room, key, bandonce.KeyIntent))
					state, err := l.Key(s.ctx, room, key)
					assert.NoError(t, err)
					assert.Equal(t, bandonce.KeyIntent, state, "room %s key %s", room, key)
					assert.NoError(t, l.SetStep(s.ctx, room, id, "s", []byte(room+id)))
					assert.NoError(t, l.SetKey(s.ctx, room, key, bandonce.KeyAccepted))
					assert.NoError(t, l.SetAckPending(s.ctx, room, id, true))
					if m < messages-1 { // leave the last mark outstanding
						assert.NoError(t, l.SetAckPending(s.ctx, room, id, false))
					}
				}
			})
		}
		wg.Wait()
		verify := func(l bandonce.Ledger) {
			t.Helper()
			for r := range rooms {
				room := fmt.Sprintf("room-%d", r)
				for m := range messages {
					id := fmt.Sprintf("m%d", m)
					assertKey(t, s.ctx, l, room, bandonce.DefaultKey(id), bandonce.KeyAccepted)
					assertStep(t, s.ctx, l, room, id, "s", room+id)
					assertAck(t, s.ctx, l, room, id, m == messages-1)
				}
			}
		}
		verify(l)
		if s.reopen != nil {
			verify(s.reopen(l))
		}
	}},
}

// failOnPanic, deferred on a goroutine a check starts, fails the check
// with the ledger's panic instead of crashing the program.
func failOnPanic(t tester, room string) {
	if p := recover(); p != nil {
		t.Errorf("panic in room %s: %v", room, p)
	}
}
