package bandonce_test

// What a signal costs a message's failure budget (MaxAttempts): nothing. A
// stop, an interrupt, a handler error a signal caused or a failed claim is
// never charged, and gives no attempt back.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.1.12 (Python interrupt suite).
// With a budget of one failure, a stop must not count as one.
func TestStopDoesNotSpendTheRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "stopped once")
		stop := r.run(func(c *bandonce.Config) { c.MaxAttempts = 1 })
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		r.h.setWork(0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, r.out.of(id))
		assert.Zero(t, r.countMarks(id, "failed"), "not dead-lettered")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Origin: control-semantics.md §6.1 review finding (f).
// A control abort costs no attempt and gives none back. Cap 3: two real
// failures, then a third attempt cut off by a stop. After play exactly one
// more real attempt is allowed, and its failure is the last. (An interrupt
// consumes the message, so there is no later attempt to allow; it must not
// dead-letter it either.)
func TestAControlAbortNeitherSpendsNorResetsTheBudget(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, time.Hour)
			room := r.rooms[0]
			id := r.say(room, "flaky")
			r.h.failNext(id, 2)
			stop := r.run(func(c *bandonce.Config) { c.MaxAttempts = 3 })
			time.Sleep(time.Minute)
			require.Equal(t, 3, r.h.callsOf(id), "two failures, and the third attempt runs")
			require.NoError(t, r.band.StopRoom(room.ID))
			time.Sleep(time.Second)
			r.h.failNext(id, 10)
			require.NoError(t, r.band.PlayRoom(room.ID))
			time.Sleep(5 * time.Minute)
			require.NoError(t, stop())

			assert.Equal(t, 4, r.h.callsOf(id), "one more real attempt, and no other")
			assert.Equal(t, []bandonce.OutcomeKind{bandonce.Failed, bandonce.Failed, bandonce.Stopped, bandonce.DeadLettered}, r.out.of(id))
			assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id), "dead-lettered messages are consumed")
		})
	})
	t.Run("interrupt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, time.Hour)
			room := r.rooms[0]
			id := r.say(room, "flaky")
			r.h.failNext(id, 2)
			stop := r.run(func(c *bandonce.Config) { c.MaxAttempts = 3 })
			time.Sleep(time.Minute)
			require.Equal(t, 3, r.h.callsOf(id))
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(5 * time.Minute)
			require.NoError(t, stop())

			assert.Equal(t, 3, r.h.callsOf(id))
			assert.Equal(t, []bandonce.OutcomeKind{bandonce.Failed, bandonce.Failed, bandonce.Interrupted}, r.out.of(id))
			assert.Equal(t, 2, r.countMarks(id, "failed"), "no dead-letter mark")
		})
	})
}

// Origin: control-semantics.md §6.3 gap G13.
// A failed processing mark is not a handler failure and is never charged. With
// a budget of one failure, two failed claims later the handler still gets its
// attempt.
func TestAFailedClaimChargesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "hard to claim")
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Count: 10, Kind: fakeband.FailBefore, Status: 503})
		stop := r.run(func(c *bandonce.Config) { c.MaxAttempts = 1 })
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 10, r.band.FaultsFired()["processing/fail_before"], "both claims' retries all failed")
		assert.Equal(t, 1, r.h.callsOf(id))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied}, r.out.of(id))
		assert.Zero(t, r.countMarks(id, "failed"))
	})
}

// Origin: control-semantics.md §1.4 (transition table), a row no Python scenario names.
// Core rule: the cause decides, not what the handler returns. A handler that
// fails because its context was cancelled by a signal has not failed: with a
// budget of one failure, a stopped message is still answered after play.
func TestAHandlerErrorCausedByASignalIsNotAFailure(t *testing.T) {
	for _, mode := range []string{"interrupt", "stop"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				out := &outcomes{}
				var cut atomic.Bool
				cut.Store(true)
				h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
					if cut.Load() {
						<-ctx.Done()
						return nil, fmt.Errorf("the model call failed: %w", context.Cause(ctx))
					}
					return echo(ctx, m)
				}
				id := w.say(room, "cut")
				cfg := w.socketConfig(h)
				cfg.MaxAttempts = 1
				cfg.Hooks.Outcome = out.add
				stop := startOnce(w, cfg)
				time.Sleep(time.Second)
				if mode == "interrupt" {
					require.NoError(t, w.band.Interrupt(w.agent.ID, room.ID))
				} else {
					require.NoError(t, w.band.StopRoom(room.ID))
				}
				time.Sleep(time.Second)
				cut.Store(false)
				require.NoError(t, w.band.PlayRoom(room.ID))
				time.Sleep(5 * time.Second)
				require.NoError(t, stop())

				assert.Zero(t, w.countMarks(id, "failed"))
				if mode == "interrupt" {
					assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, out.of(id))
					assert.Empty(t, w.replies(room))
				} else {
					assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, out.of(id))
					assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
				}
			})
		})
	}
}
