package bandonce_test

// What play does: it clears a stop and hands the room its left messages
// again, in order, and nothing else; a play whose push never arrived is
// found by probing /next.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.1.9 (Python interrupt suite).
func TestPlayClearsTheStopAndAsksNextOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, _, stop := stoppedRig(t, 0)
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

// Origin: control-semantics.md §5.1.11 (Python interrupt suite).
func TestPlayReplaysTheLeftMessageAndReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, said, stop := stoppedRig(t, time.Minute, "replayed")
		id := said[0]
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

// Origin: control-semantics.md §5.2.8 (Python runtime control suite).
func TestStopThenPlayAreBothApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		r.h.setWork(0)
		require.NoError(t, r.band.StopRoom(room.ID))
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		require.NotEmpty(t, r.h.causes(id))
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrStopped, "the stop was applied")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "and so was the play")
	})
}

// Origin: control-semantics.md §5.3.15 (Python bridge suite).
func TestRoomPlayHandlesTheMessageThatArrivedWhileStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, _, stop := stoppedRig(t, 0)
		id := r.say(room, "m-a")
		time.Sleep(time.Minute)
		require.Zero(t, r.h.callsOf(id))
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Origin: control-semantics.md §5.3.17 (Python bridge suite).
func TestPlayWithNothingPendingRunsNoHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, _, stop := stoppedRig(t, 0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Empty(t, r.h.allCalls())
		assert.Empty(t, r.replies(room))
	})
}

// Origin: control-semantics.md §5.3.18 (Python bridge suite), §6.1 review finding (c).
// Play's catch-up runs on the room, not on the receive path, so the signals
// after it apply at once even while its /next hangs.
func TestPlayDoesNotBlockTheReceivePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, time.Hour)
		stopped, busy := r.rooms[0], r.rooms[1]
		inBusy := r.say(busy, "slow")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(stopped.ID))
		waiting := r.say(stopped, "while stopped")
		time.Sleep(time.Second)
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.Delay, Delay: 2 * time.Minute})

		require.NoError(t, r.band.PlayRoom(stopped.ID))
		require.NoError(t, r.band.StopRoom(stopped.ID))
		require.NoError(t, r.band.Interrupt(r.agent.ID, busy.ID))
		time.Sleep(time.Second)
		assert.Equal(t, 1, r.band.FaultsFired()["next/delay"], "the catch-up's /next is hanging")
		require.Len(t, r.h.causes(inBusy), 1, "the interrupt after the play landed at once")
		assert.ErrorIs(t, r.h.causes(inBusy)[0], bandonce.ErrInterrupted)

		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())
		assert.Zero(t, r.h.callsOf(waiting), "the stop right after the play held")
	})
}

// Origin: control-semantics.md §6.3 gap G6.
// A play whose push never arrives (sent while the socket was down, or lost on
// a live one) leaves the room deaf in Python until another play. The shell
// finds Band's gate open again by probing /next: at once after a reconnect, as
// soon as its stop's grace is over when a message is pushed while it is
// stopped, and every ResyncInterval otherwise. A probe that gets no answer is
// owed until it gets one.
func TestALostPlayIsFoundByAProbe(t *testing.T) {
	t.Run("a message pushed after the lost play", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, room, _, stop := stoppedRig(t, 0)
			time.Sleep(5 * time.Second)
			r.gateQuietly(room, false)
			id := r.say(room, "after the lost play")
			time.Sleep(3 * time.Second)
			require.NoError(t, stop())
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "its push made the room probe")
		})
	})
	t.Run("no push since: the periodic probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, room, _, stop := stoppedRig(t, 0)
			id := r.say(room, "while stopped")
			time.Sleep(5 * time.Second) // its push's probe found the gate closed
			r.gateQuietly(room, false)
			time.Sleep(30 * time.Second)
			require.Zero(t, r.h.callsOf(id), "nothing told the room yet")
			time.Sleep(time.Minute) // one ResyncInterval
			require.NoError(t, stop())
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "the periodic probe found the gate open")
		})
	})
	for name, failedProbes := range map[string]int{"a reconnect": 0, "a reconnect whose probe fails first": 5} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, room, _, stop := stoppedRig(t, 0)
				id := r.say(room, "while stopped")
				time.Sleep(5 * time.Second)
				r.gateQuietly(room, false)
				time.Sleep(time.Second)
				require.Zero(t, r.h.callsOf(id), "nothing told the room yet")

				if failedProbes > 0 {
					// Every try of the probe's request fails: one failed probe.
					r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Count: failedProbes, Kind: fakeband.FailBefore, Status: 503})
				}
				r.band.DropSockets(r.agent.ID)
				time.Sleep(30 * time.Second) // well before the periodic probe
				require.NoError(t, stop())
				assert.Equal(t, failedProbes, r.band.FaultsFired()["next/fail_before"])
				assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "the reconnect's probe found the gate open")
			})
		})
	}
}

// Origin: control-semantics.md §1.4 (transition table), row S3 play.
// A play while the handler runs in a room that is not stopped leaves that
// cycle alone.
func TestPlayDuringAHandlerLeavesItAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 10*time.Second)
		room := r.rooms[0]
		id := r.say(room, "working")
		stop := r.run(nil)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(30 * time.Second)
		require.NoError(t, stop())
		assert.Empty(t, r.h.causes(id))
		assert.Equal(t, 1, r.h.callsOf(id))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Band ended the agent_control channel (phx_error) while the room was
// stopped, and the play pushed before the channel was joined again reached
// nobody. A join answered after pushes were missed makes the rooms catch
// up (socket.go, catchUp): for agent_control, the push missed may be a
// play, so a stopped room must probe /next then. It does not: the room
// stays deaf until its periodic probe, a ResyncInterval later.
func TestARejoinedControlChannelMakesAStoppedRoomLookForALostPlay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(func(cfg *bandonce.Config) { cfg.ResyncInterval = time.Hour })
		require.NoError(t, r.band.StopRoom(room.ID))
		id := r.say(room, "while stopped")
		time.Sleep(5 * time.Second) // its push's probe found the gate closed
		require.Zero(t, r.h.callsOf(id))

		// Band ends the control channel; the play is lost meanwhile.
		require.NoError(t, r.tap.pushRaw("phx_error", `{}`))
		synctest.Wait()
		r.gateQuietly(room, false)
		joinsBefore := len(r.tap.joined())
		time.Sleep(30 * time.Second) // the channel is joined again within a few seconds
		require.Greater(t, len(r.tap.joined()), joinsBefore, "agent_control was joined again")
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "the rejoined control channel made the stopped room probe")
	})
}
