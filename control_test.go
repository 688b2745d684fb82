package bandonce_test

// What every signal does to the cycle in flight: the cause decides the
// message's fate, not what the handler returns; a signal makes no request of
// its own, waits for a handler that ignores it, survives a failed claim, and
// leaves nothing armed when nothing is in flight.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.3.3, §5.3.4 (Python bridge suite).
// The handler in flight returns a reply after the signal; nothing is posted,
// not even attempted.
func TestASignalDropsTheReplyOfTheHandlerInFlight(t *testing.T) {
	for _, mode := range []string{"interrupt", "stop"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, time.Hour)
				room := r.rooms[0]
				r.say(room, "slow")
				stop := r.run(nil)
				r.tap.signal(mode, "room", room.ID, "")
				time.Sleep(time.Minute)
				require.NoError(t, stop())
				assert.Zero(t, r.tap.count("post", room.ID))
				assert.Empty(t, r.replies(room))
			})
		})
	}
}

// Origin: control-semantics.md §5.3.7 (Python bridge suite), §5.4.2 (Python link suite).
// A signal is handled on the receive path and makes no request of its own;
// with nothing in flight it changes nothing. The only requests a stop leads to
// are the stopped room's probes, one per ResyncInterval.
func TestControlSignalsMakeNoRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		before := r.band.Requests()
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		require.NoError(t, r.band.Interrupt(r.agent.ID, ""))
		r.tap.signal("stop", "room", room.ID, "")
		time.Sleep(5 * time.Minute)
		after := r.band.Requests()
		require.NoError(t, stop())
		for _, ep := range []fakeband.Endpoint{fakeband.EndpointProcessing, fakeband.EndpointProcessed, fakeband.EndpointPost, fakeband.EndpointContext} {
			assert.Equal(t, before[ep], after[ep], "%s", ep)
		}
		assert.LessOrEqual(t, after[fakeband.EndpointNext]-before[fakeband.EndpointNext], 5, "one probe per minute")
	})
}

// Origin: control-semantics.md §6.1 review finding (b).
// Cancelling is cooperative. A handler that ignores its context keeps the room
// until it returns, and what it returns is dropped; the shell never pretends
// it stopped.
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
		assert.Equal(t, []string{"processing"}, r.marksOf(first), "nothing marked while the handler still runs")

		r.h.setWork(0)
		time.Sleep(30 * time.Second)
		require.NoError(t, stop())
		assert.True(t, r.h.used(first))
		assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(first)), "its late reply is dropped")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, first))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)))
	})
}

// Origin: control-semantics.md §1.4 (transition table), a row no Python scenario names.
// Two signals racing on one cycle. Whichever kind wins, the cycle dies,
// nothing is posted, the room ends stopped, and after play the message is
// ended once: either consumed, or answered once.
func TestTwoRacingSignalsKillTheCycleWhateverTheOrder(t *testing.T) {
	for _, order := range [][2]string{{"interrupt", "stop"}, {"stop", "interrupt"}} {
		for _, p := range []phase{{name: "handler", work: time.Hour}, {name: "claim", hold: fakeband.EndpointProcessing}} {
			t.Run(order[0]+"-then-"+order[1]+"/"+p.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := newRig(t, 1, p.work)
					room := r.rooms[0]
					id := r.say(room, "raced")
					if p.hold != "" {
						r.band.Inject(fakeband.Fault{Endpoint: p.hold, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
					}
					stop := r.run(nil)
					for _, sig := range order {
						r.tap.signal(sig, "room", room.ID, "")
					}
					time.Sleep(30 * time.Second)
					assert.Empty(t, r.replies(room))
					assert.Zero(t, r.tap.count("post", room.ID))

					r.h.setWork(0)
					r.tap.signal("play", "room", room.ID, "")
					time.Sleep(30 * time.Second)
					require.NoError(t, stop())
					kinds := r.out.of(id)
					t.Logf("outcomes: %v", kinds)
					require.NotEmpty(t, kinds)
					switch kinds[0] {
					case bandonce.Interrupted:
						assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, kinds, "consumed, never run again")
						assert.Empty(t, r.replies(room))
					case bandonce.Stopped:
						assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, kinds, "left, then answered once")
						assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
					default:
						t.Fatalf("outcomes %v", kinds)
					}
					assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
				})
			})
		}
	}
}

// Origin: control-semantics.md §6.3 gap G4.
// A signal recorded in the claim window must survive the claim failing. The
// processing mark is held past MarkTimeout, so it fails.
func TestASignalInTheClaimWindowSurvivesAFailedClaim(t *testing.T) {
	t.Run("interrupt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			id := r.say(room, "w1")
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
			stop := r.run(func(c *bandonce.Config) { c.MarkTimeout = 5 * time.Second })
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(time.Minute)
			require.NoError(t, stop())
			assert.Equal(t, 1, r.band.FaultsFired()["processing/delay"])
			assert.Equal(t, []string{"processing", "processed"}, r.marksOf(id), "the held claim never landed; the next delivery consumed it")
			assert.Zero(t, r.h.callsOf(id), "the interrupt was not lost with the claim")
			assert.Empty(t, r.replies(room))
			assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id), "consumed on the next delivery")
		})
	})
	t.Run("stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			id := r.say(room, "w2")
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
			stop := r.run(func(c *bandonce.Config) { c.MarkTimeout = 5 * time.Second })
			r.tap.signal("stop", "room", room.ID, "")
			r.gateQuietly(room, true)
			time.Sleep(10 * time.Second)
			nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
			time.Sleep(5 * time.Minute)
			assert.Zero(t, r.h.callsOf(id), "the stop was not lost with the claim")
			r.probesOnly(t, room, nexts, served, 5)

			r.gateQuietly(room, false)
			r.tap.signal("play", "room", room.ID, "")
			time.Sleep(time.Minute)
			require.NoError(t, stop())
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "played: a real attempt")
		})
	})
}

// Origin: control-semantics.md §5.1.19 (Python interrupt suite).
// Signals of every scope with nothing in flight leave nothing behind for the
// next message.
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
