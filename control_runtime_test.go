package bandonce_test

// The Python runtime's interrupt suite (control-semantics.md §5.1),
// translated to the shell. The WebSocket path and the backlog path are one
// path here: every message comes through /next, woken by a push or a poll.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// §5.1.1
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

// §5.1.2
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

// §5.1.3
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

// §5.1.4, and the bridge's §5.3.5: the stopped message is not remembered
// as done anywhere, so play hands it back and it is answered.
func TestStopLeavesTheRunningMessageActionable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "slow one")
		ledger := bandonce.NewMemoryLedger()
		stop := r.run(func(c *bandonce.Config) { c.Ledger = ledger })
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)

		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrStopped)
		assert.Zero(t, r.countMarks(id, "processed"))
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id), "left for replay")
		pending, err := ledger.AckPending(t.Context(), room.ID, id)
		require.NoError(t, err)
		assert.False(t, pending, "not recorded as settled")
		key, err := ledger.Key(t.Context(), room.ID, bandonce.DefaultKey(id))
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyUnknown, key, "no reply recorded")

		r.h.setWork(0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 2, r.h.callsOf(id), "the claim was released: play hands it back")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, r.out.of(id))
	})
}

// §5.1.5
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

// §5.1.6
func TestShutdownCancelsTheHandlerWithoutMarking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		id := r.say(r.rooms[0], "cut off")
		stop := r.run(func(c *bandonce.Config) { c.ShutdownTimeout = 2 * time.Second })
		require.Equal(t, 1, r.h.busy())
		require.NoError(t, stop(), "a graceful shutdown")

		assert.Zero(t, r.h.busy(), "no handler is left running")
		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrShutdown)
		assert.Equal(t, []string{"processing"}, r.marksOf(id))
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id), "served again after a restart")
	})
}

// §5.1.7
func TestStopSetsTheRoomStoppedAndCancelsTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "slow one")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		later := r.say(room, "while stopped")
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())

		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrStopped)
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped}, r.out.of(id))
		assert.Zero(t, r.countMarks(id, "processed"))
		assert.Zero(t, r.h.callsOf(later), "the room stays stopped")
		r.probesOnly(t, room, nexts, served, 6) // a stopped room only probes
	})
}

// §5.1.8: the stop here comes before the platform's gate closes (its
// push outran the gate), so for a moment only the shell's own flag keeps
// the handler from running: the room does not probe until the stop has
// settled, and by then the gate is closed.
func TestAStoppedRoomStartsNoHandlerForANewMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "room", room.ID, "ctl-local-stop")
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		id := r.say(room, "while stopped")
		time.Sleep(time.Second)
		assert.Equal(t, nexts, r.tap.count("next", room.ID), "the push only woke a stopped room")
		r.gateQuietly(room, true)
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())

		assert.Zero(t, r.h.callsOf(id))
		assert.Empty(t, r.marksOf(id), "neither processing nor processed")
		assert.Equal(t, fakeband.StatusDelivered, r.band.Status(r.agent.ID, id))
		r.probesOnly(t, room, nexts, served, 6)
	})
}

// §5.1.9
func TestPlayClearsTheStopAndAsksNextOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		nexts := r.tap.count("next", room.ID)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Second)
		assert.Equal(t, nexts+1, r.tap.count("next", room.ID), "one catch-up")

		id := r.say(room, "after play")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "the flag is clear")
	})
}

// §5.1.10: the shell has no stale sweep, since /next serves processing
// messages too; what must hold is that nothing fetches the stopped
// message while the room is stopped, however many resyncs come due.
func TestWhileStoppedTheLeftMessageIsNeverFetchedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "slow one")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		time.Sleep(10 * time.Minute) // ten resync intervals
		require.NoError(t, stop())

		assert.Equal(t, 1, r.h.callsOf(id))
		r.probesOnly(t, room, nexts, served, 10)
		assert.Equal(t, []string{"processing"}, r.marksOf(id))
	})
}

// §5.1.11
func TestPlayReplaysTheLeftMessageAndReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "replayed")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		r.h.setWork(0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		assert.Equal(t, []string{id, id}, r.h.allCalls())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
	})
}

// §5.1.12: with a budget of one failure, a stop must not count as one.
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

// §5.1.13
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

// §5.1.14
func TestStopDuringABacklogLeavesTheCurrentMessageAndTheRestUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		ids := []string{r.say(room, "bk1"), r.say(room, "bk2"), r.say(room, "bk3")}
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())

		assert.Equal(t, ids[:1], r.h.allCalls())
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, ids[0]))
		for _, id := range ids[1:] {
			assert.Equal(t, fakeband.StatusDelivered, r.band.Status(r.agent.ID, id))
		}
		assert.Empty(t, r.replies(room))
	})
}

// §5.1.15 and review finding (g): a stop mid-drain ends the drain. The
// stop's push comes before the platform's gate closes, so /next would
// serve the stopped message again if the room asked before the stop has
// settled.
func TestStopMidDrainDoesNotFetchTheStoppedMessageAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Minute)
		room := r.rooms[0]
		id := r.say(room, "loop1")
		r.say(room, "loop2")
		stop := r.run(nil)
		r.tap.signal("stop", "room", room.ID, "ctl-local-stop")
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		time.Sleep(time.Second)
		assert.Equal(t, nexts, r.tap.count("next", room.ID), "the drain broke off")
		r.gateQuietly(room, true)
		time.Sleep(10 * time.Minute)
		require.NoError(t, stop())

		assert.Equal(t, []string{id}, r.h.allCalls(), "the handler ran exactly once")
		r.probesOnly(t, room, nexts, served, 10)
		assert.Zero(t, r.countMarks(id, "processed"))
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id))
	})
}

// holdFirst holds the first request to endpoint for ten seconds, so a
// signal can land while it is in flight.
func holdFirst(w *world, endpoint fakeband.Endpoint) {
	w.band.Inject(fakeband.Fault{Endpoint: endpoint, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
}

// §5.1.16
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

// §5.1.17
func TestStopInTheClaimWindowLeavesTheMessageWithoutTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "w2")
		holdFirst(r.world, fakeband.EndpointProcessing)
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(20 * time.Second)
		require.NoError(t, stop())

		assert.Zero(t, r.h.callsOf(id), "the handler never started")
		assert.True(t, r.band.Stopped(r.agent.ID, room.ID))
		assert.Equal(t, []string{"processing"}, r.marksOf(id))
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped}, r.out.of(id))
	})
}

// §5.1.18
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

// §5.1.19: signals of every scope with nothing in flight leave nothing
// behind for the next message.
func TestInterruptBetweenCyclesLeavesNothingArmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.Interrupt(r.agent.ID, ""))
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		r.tap.signal("interrupt", "agent", "", "")
		n1 := r.say(room, "n1")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())

		assert.Empty(t, r.h.causes(n1))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied}, r.out.of(n1))
	})
}
