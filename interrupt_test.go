package bandonce_test

// What an interrupt does: it cancels the handler in flight, posts nothing of
// what it returns, consumes the message, and the room goes on with the next.
// Every message comes through /next, woken by a push or a poll, so the
// Python suites' WebSocket path and backlog path are one path here.

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: the first end-to-end signal tests over the fake's socket.
func TestInterruptDuringASlowHandlerPostsNothingAndConsumesTheMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		first := w.say(room, "slow one")
		h := &slowHandler{d: time.Minute}
		stop := w.start(w.socketConfig(h.handle))
		time.Sleep(time.Second)
		require.NoError(t, w.band.Interrupt(w.agent.ID, ""))
		time.Sleep(time.Second)
		h.setDelay(0)
		second := w.say(room, "next one")
		runFor(10 * time.Second)
		require.NoError(t, stop())

		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrInterrupted)
		assert.Zero(t, w.repliesTo(room, bandonce.DefaultKey(first)), "a reply returned after the interrupt is dropped")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, first))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(second)), "the next message is handled normally")
		for _, mk := range w.band.Marks(w.agent.ID, first) {
			assert.NotEqual(t, "failed", mk.Kind)
		}
	})
}

// Origin: control-semantics.md §5.1.1 (Python interrupt suite).
func TestInterruptCancelsTheRunningHandlerConsumesTheMessageAndTheRoomGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		first := r.say(room, "slow one")
		stop := r.run(nil)
		require.Equal(t, []string{first}, r.h.allCalls(), "the handler is running")

		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Second)
		r.h.setWork(0)
		second := r.say(room, "next one")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		require.Len(t, r.h.causes(first), 1)
		assert.ErrorIs(t, r.h.causes(first)[0], bandonce.ErrInterrupted)
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(first)), "nothing posted for the interrupted message")
		assert.Equal(t, 1, r.countMarks(first, "processed"), "consumed with exactly one processed mark")
		assert.Zero(t, r.countMarks(first, "failed"), "an interrupt is not a failure")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, first))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, r.out.of(first))

		assert.Empty(t, r.h.causes(second), "the interrupt does not leak into the next cycle")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)), "the room goes on")
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied}, r.out.of(second))
	})
}

// Origin: control-semantics.md §5.1.2 (Python interrupt suite).
func TestInterruptWhileAToolRunsDropsTheToolResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour) // the "tool" is the handler's long wait
		room := r.rooms[0]
		id := r.say(room, "use the tool")
		stop := r.run(nil)
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Second)
		require.NoError(t, stop())

		assert.False(t, r.h.used(id), "the code after the tool never ran")
		assert.Zero(t, r.tap.count("post", room.ID), "the reply the handler returned anyway was never sent")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
	})
}

// Origin: control-semantics.md §5.1.3 (Python interrupt suite).
func TestInterruptWithNoCycleIsANoOpAndTheNextMessageRunsNormally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Second)
		m1 := r.say(room, "after the interrupt")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		assert.Equal(t, []string{m1}, r.h.allCalls())
		assert.Empty(t, r.h.causes(m1))
		assert.Equal(t, 1, r.countMarks(m1, "processed"))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(m1)))
	})
}

// Origin: control-semantics.md §5.1.5 (Python interrupt suite).
func TestAHandlerThatSwallowsTheInterruptDoesNotTurnALaterShutdownIntoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 10*time.Second)
		r.h.ignoreCancel = true
		room := r.rooms[0]
		first := r.say(room, "swallows the cancel")
		stop := r.run(func(c *bandonce.Config) { c.ShutdownTimeout = time.Second })
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(20 * time.Second)
		assert.True(t, r.h.used(first), "the handler finished its work regardless")
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(first)), "its reply, returned after the interrupt, is dropped")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, first), "the message is consumed")

		r.h.mu.Lock()
		r.h.ignoreCancel, r.h.work = false, time.Hour
		r.h.mu.Unlock()
		second := r.say(room, "cut off by shutdown")
		time.Sleep(time.Second)
		require.Equal(t, 1, r.h.callsOf(second))
		require.NoError(t, stop())

		require.Len(t, r.h.causes(second), 1)
		assert.ErrorIs(t, r.h.causes(second)[0], bandonce.ErrShutdown, "shutdown is not mistaken for an interrupt")
		assert.Equal(t, []string{"processing"}, r.marksOf(second), "nothing marked on shutdown")
		assert.Empty(t, r.out.of(second))
	})
}

// Origin: control-semantics.md §5.1.13 (Python interrupt suite).
func TestInterruptDuringABacklogConsumesOnlyTheCurrentMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		ids := []string{r.say(room, "bk1"), r.say(room, "bk2"), r.say(room, "bk3")}
		stop := r.run(nil)
		r.h.setWork(0) // the first call already waits its minute
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		assert.Equal(t, ids, r.h.allCalls(), "the backlog goes on, in order")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, ids[0]))
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(ids[0])))
		for _, id := range ids[1:] {
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
			assert.Empty(t, r.h.causes(id))
		}
	})
}

// Origin: control-semantics.md §5.1.16 (Python interrupt suite).
func TestInterruptInTheClaimWindowConsumesWithoutTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "w1")
		holdFirst(r.world, fakeband.EndpointProcessing)
		stop := r.run(nil)
		require.Empty(t, r.marksOf(id), "the processing mark is still held")
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(20 * time.Second)
		require.NoError(t, stop())

		assert.Zero(t, r.h.callsOf(id), "the handler never started")
		assert.Equal(t, []string{"processing", "processed"}, r.marksOf(id))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, r.out.of(id))
		assert.Empty(t, r.replies(room))
	})
}

// Origin: control-semantics.md §5.1.18 (Python interrupt suite).
func TestInterruptInTheClaimWindowOfABacklogAdvancesToTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		first, second := r.say(room, "bw1"), r.say(room, "bw2")
		holdFirst(r.world, fakeband.EndpointProcessing)
		stop := r.run(nil)
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(20 * time.Second)
		require.NoError(t, stop())

		assert.Equal(t, []string{second}, r.h.allCalls())
		assert.Equal(t, []string{"processing", "processed"}, r.marksOf(first))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)))
	})
}

// Origin: control-semantics.md §5.3.6 (Python bridge suite).
func TestAfterAnInterruptTheRoomTakesTheNextMessageAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		first, second := r.say(room, "m1"), r.say(room, "m2")
		stop := r.run(nil)
		r.h.setWork(0)
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Second)
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)), "m2 answered within a second")
		require.NoError(t, stop())
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(first)))
		assert.Len(t, r.replies(room), 1, "only m2 was posted")
	})
}

// Origin: control-semantics.md §6.1 review finding (a).
// The bridge cancelled a task waiting for the room while the one actually
// forwarding ran on. Here a waiting message is not yet in any cycle, so the
// interrupt must reach the handler that is running, and only it.
func TestAnInterruptReachesTheRunningHandlerNotAWaitingMessage(t *testing.T) {
	t.Run("same room", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, time.Hour)
			room := r.rooms[0]
			running, waiting := r.say(room, "running"), r.say(room, "waiting")
			stop := r.run(nil)
			r.h.setWork(0)
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(5 * time.Second)
			require.NoError(t, stop())
			require.Len(t, r.h.causes(running), 1)
			assert.ErrorIs(t, r.h.causes(running)[0], bandonce.ErrInterrupted)
			assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(running)))
			assert.Empty(t, r.h.causes(waiting))
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(waiting)))
		})
	})
	t.Run("room waiting for a slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 2, time.Hour)
			ids := map[string]string{r.rooms[0].ID: r.say(r.rooms[0], "a"), r.rooms[1].ID: r.say(r.rooms[1], "b")}
			stop := r.run(func(c *bandonce.Config) { c.MaxConcurrentRooms = 1 })
			calls := r.h.allCalls()
			require.Len(t, calls, 1, "one slot: one room runs, the other waits")
			runningRoom, waitingRoom := r.rooms[0].ID, r.rooms[1].ID
			if calls[0] != ids[runningRoom] {
				runningRoom, waitingRoom = waitingRoom, runningRoom
			}
			require.NoError(t, r.band.Interrupt(r.agent.ID, waitingRoom))
			time.Sleep(time.Second)
			assert.Empty(t, r.h.causes(ids[runningRoom]), "the waiting room's interrupt cancels nothing else")

			r.h.setWork(0)
			require.NoError(t, r.band.Interrupt(r.agent.ID, runningRoom))
			time.Sleep(5 * time.Second)
			require.NoError(t, stop())
			require.Len(t, r.h.causes(ids[runningRoom]), 1)
			assert.ErrorIs(t, r.h.causes(ids[runningRoom])[0], bandonce.ErrInterrupted)
			assert.Empty(t, r.h.causes(ids[waitingRoom]))
			assert.Equal(t, 1, r.repliesTo(fakeband.Room{ID: waitingRoom}, bandonce.DefaultKey(ids[waitingRoom])))
		})
	})
}

// Origin: control-semantics.md §6.1 review finding (d).
// The processed mark of an interrupted message keeps failing. The message is
// ack-pending: every redelivery retries the mark alone, and the handler never
// runs for it again.
func TestAnInterruptedMessageWhoseAckFailsNeverRunsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "interrupted")
		stop := r.run(nil)
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 1000, Kind: fakeband.FailBefore, Status: 503})
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(2 * time.Minute)
		require.Contains(t, r.out.of(id), bandonce.AckPending)
		require.Greater(t, r.countMarks(id, "processing"), 2, "redelivered several times meanwhile")
		require.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id))

		r.band.ClearFaults()
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.h.callsOf(id), "the handler ran once")
		assert.Zero(t, r.tap.count("post", room.ID))
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
		kinds := r.out.of(id)
		assert.Equal(t, bandonce.Acknowledged, kinds[len(kinds)-1])
	})
}

// A send cut off in flight (here by the shutdown that follows an
// interrupt) has an unknown outcome: Band may still apply it. The message
// is consumed only once that send has settled, or not at all by this
// life, so a later message of the room under the same key, handled by the
// next life at once, finds what was sent and does not send it a second
// time: a reply's POST, and a guarded agent-API write alike.
func TestASendCutOffInFlightIsWaitedForBeforeTheMessageIsConsumed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint fakeband.Endpoint
		handler  bandonce.Handler
		memories map[string]int
	}{
		{"reply", fakeband.EndpointPost, keyedByBody, map[string]int{}},
		{"memory", fakeband.EndpointCreateMemory, rememberThenReply, map[string]int{"order-1": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				w.say(room, "order-1")
				w.say(room, "order-1") // the same natural key
				w.band.Inject(fakeband.Fault{Endpoint: tc.endpoint, Nth: 1, Kind: fakeband.ApplyLate, Delay: 4 * time.Second})
				cfg := w.socketConfig(tc.handler)
				cfg.RequestTimeout = 10 * time.Second
				cfg.ShutdownTimeout = 100 * time.Millisecond // then the send is cut off
				stop := w.start(cfg)
				time.Sleep(time.Second) // the first send is held
				synctest.Wait()
				require.NoError(t, w.band.Interrupt(w.agent.ID, room.ID))
				synctest.Wait() // the interrupt has reached the turn
				require.NoError(t, stop())

				stop = w.start(cfg)
				runFor(time.Minute)
				require.NoError(t, stop())
				assert.Equal(t, 1, w.repliesTo(room, "order-1"), "the send cut off in flight landed, and was the only one")
				assert.Equal(t, tc.memories, memoryKeys(t, w))
			})
		})
	}
}

// The handler ran and returned its reply, but Band refused the POST with
// its plan quota (403 limit_reached): nothing was sent, and the reply waits
// in the room (unsent) for the next round after a backoff. An interrupt
// that lands in that backoff must withdraw the reply (nothing was posted
// yet) and consume the message; it must not be posted after the interrupt.
func TestAnInterruptWhileARefusedReplyWaitsForItsNextTryWithdrawsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Count: 8, Kind: fakeband.FailBefore,
			Status: http.StatusForbidden, Code: "limit_reached"})
		id := r.say(room, "hello")
		stop := r.run(nil) // the reply's POST is refused, and refused again after each backoff
		require.Equal(t, 1, r.h.callsOf(id))
		require.Zero(t, len(r.replies(room)), "nothing posted yet")
		require.NotEqual(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))

		require.Less(t, r.band.FaultsFired()["post/fail_before"], 8, "the interrupt lands while the reply still waits")
		r.tap.signal("interrupt", "room", room.ID, "ctl-audit-1")
		time.Sleep(2 * time.Minute)
		require.NoError(t, stop())

		assert.Zero(t, len(r.replies(room)), "no reply is posted after the interrupt")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id), "the interrupt consumed the message")
		assert.Contains(t, r.out.of(id), bandonce.Interrupted)
	})
}
