package bandonce_test

// The review findings of the Python PR (control-semantics.md §6.1) that
// no other test here already names: (a), (b), (d), (f). The others:
// (c) TestPlayDoesNotBlockTheReceivePath, (e) TestEveryPhaseHasADefinedOutcome,
// (g) TestStopMidDrainDoesNotFetchTheStoppedMessageAgain,
// (h) TestStopSurvivesAReconnect, (i) TestAnUnknownModeIsAWarningAndChangesNothing,
// (j) TestAStaleDuplicateDoesNotCancelANewerCycle.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Review (a): the bridge cancelled a task waiting for the room while the
// one actually forwarding ran on. Here a waiting message is not yet in
// any cycle, so the interrupt must reach the handler that is running,
// and only it.
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

// Review (b): cancelling is cooperative. A handler that ignores its
// context keeps the room until it returns, and what it returns is
// dropped; the shell never pretends it stopped.
func TestTheRoomWaitsForAHandlerThatIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 30*time.Second)
		r.h.ignoreCancel = true
		room := r.rooms[0]
		first, second := r.say(room, "stubborn"), r.say(room, "next")
		stop := r.run(nil)
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(10 * time.Second)
		assert.Equal(t, []string{first}, r.h.allCalls(), "one message at a time: the next waits")
		assert.Equal(t, 1, r.h.busy())
		assert.Equal(t, []string{"processing"}, r.marksOf(first), "nothing settled while the handler still runs")

		r.h.setWork(0)
		time.Sleep(30 * time.Second)
		require.NoError(t, stop())
		assert.True(t, r.h.used(first))
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(first)), "its late reply is dropped")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, first))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)))
	})
}

// Review (d): the processed mark of an interrupted message keeps failing.
// The message is ack-pending: every redelivery retries the mark alone,
// and the handler never runs for it again.
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

// Review (f): a control abort costs no attempt and gives none back.
// Cap 3: two real failures, then a third attempt cut off by a stop. After
// play exactly one more real attempt is allowed, and its failure is the
// last. (An interrupt consumes the message, so there is no later attempt
// to allow; it must not dead-letter it either.)
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
