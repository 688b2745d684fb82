package bandonce_test

// The gaps of the Python SDK that apply to a shell (control-semantics.md
// §6.3), each closed here. G1 and G2 are phases of
// TestEveryPhaseHasADefinedOutcome ("during next", "while the context
// loads"); the rest follow.

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// markProcessing opens an attempt on a message as the agent, as a shell
// that crashed in the middle of it would have left it.
func markProcessing(t *testing.T, w *world, room fakeband.Room, id string) {
	t.Helper()
	url := w.band.BaseURL() + "/agent/chats/" + room.ID + "/messages/" + id + "/processing"
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", w.agent.Key)
	resp, err := w.band.HTTPClient().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// G3: Python's stale-processing sweep did not look at the stop between
// messages. The shell has no separate sweep: messages a crash left
// processing come through /next like any other, so a stop in the middle
// of them leaves the rest alone, and play takes them up in order.
func TestAStopAmongMessagesLeftProcessingLeavesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		ids := []string{r.say(room, "s1"), r.say(room, "s2"), r.say(room, "s3")}
		for _, id := range ids {
			markProcessing(t, r.world, room, id)
		}
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		time.Sleep(5 * time.Minute)
		assert.Equal(t, ids[:1], r.h.allCalls())
		r.probesOnly(t, room, nexts, served, 5)

		r.h.setWork(0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, append(ids[:1:1], ids...), r.h.allCalls(), "the stopped one first, then the rest, in order")
		for _, id := range ids {
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		}
	})
}

// G4: a signal recorded in the claim window must survive the claim
// failing. The processing mark is held past MarkTimeout, so it fails.
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

// G5: Band refuses replies from a stopped agent with 403. When the stop's
// push is lost, that refusal is the stop: the message is left, not
// failed, and the room waits for play.
func TestAForbiddenReplyIsAStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 10*time.Second)
		room := r.rooms[0]
		first := r.say(room, "answered too late")
		stop := r.run(nil)
		r.band.InjectSocket(fakeband.SocketFault{Event: "agent.control", Probability: 1, Kind: fakeband.LosePush})
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Minute)
		assert.Empty(t, r.h.causes(first), "the handler never heard of the stop")
		assert.Equal(t, 1, r.tap.count("post", room.ID), "its reply was refused")
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped}, r.out.of(first))
		assert.Zero(t, r.countMarks(first, "failed"), "not a handler failure")
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, first))

		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		second := r.say(room, "while stopped")
		time.Sleep(5 * time.Minute)
		r.probesOnly(t, room, nexts, served, 6) // the room holds itself stopped

		r.band.ClearFaults()
		r.h.setWork(0)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		replies := r.replies(room)
		require.Len(t, replies, 2)
		assert.Contains(t, replies[0].Content, "[dedup_key:"+bandonce.DefaultKey(first)+"]", "in order")
		assert.Contains(t, replies[1].Content, "[dedup_key:"+bandonce.DefaultKey(second)+"]")
	})
}

// G5: after a restart the local stop is gone; Band's gate holds instead,
// for the message the stop cut off and for those that came after.
func TestAfterARestartWhileStoppedBandsGateHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		cut := r.say(room, "cut off")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		after := r.say(room, "while down")

		r.h.setWork(0)
		stop = r.run(nil)
		time.Sleep(5 * time.Minute)
		assert.Equal(t, []string{cut}, r.h.allCalls(), "nothing ran while Band's gate was closed")
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, []string{cut, cut, after}, r.h.allCalls(), "the cut-off message first")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(cut)))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(after)))
	})
}

// G6: a play whose push never arrives (sent while the socket was down,
// or lost on a live one) leaves the room deaf in Python until another
// play. The shell finds Band's gate open again by probing /next: at once
// after a reconnect, as soon as its stop's grace is over when a message is
// pushed while it is stopped, and every ResyncInterval otherwise. A probe
// that gets no answer is owed until it gets one.
func TestALostPlayIsFoundByAProbe(t *testing.T) {
	t.Run("a message pushed after the lost play", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			stop := r.run(nil)
			require.NoError(t, r.band.StopRoom(room.ID))
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
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			stop := r.run(nil)
			require.NoError(t, r.band.StopRoom(room.ID))
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
				r := newRig(t, 1, 0)
				room := r.rooms[0]
				stop := r.run(nil)
				require.NoError(t, r.band.StopRoom(room.ID))
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

// G7: an agent-wide stop holds for rooms the agent joins later, and for a
// room it leaves and rejoins, until an agent-wide play.
func TestAnAgentWideStopHoldsForRoomsAddedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		old := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "agent", "", "ctl-stop-all")
		fresh := r.band.AddRoom("later", r.human)
		require.NoError(t, r.band.AddParticipant(fresh.ID, r.agent.ID))
		require.NoError(t, r.band.RemoveParticipant(old.ID, r.agent.ID))
		time.Sleep(time.Second)
		require.NoError(t, r.band.AddParticipant(old.ID, r.agent.ID))
		time.Sleep(time.Second)
		// Band's gate agrees with the agent-wide stop in both rooms.
		r.gateQuietly(fresh, true)
		r.gateQuietly(old, true)
		ids := []string{r.say(fresh, "in the new room"), r.say(old, "in the rejoined room")}
		time.Sleep(5 * time.Minute)
		assert.Empty(t, r.h.allCalls())
		assert.Zero(t, r.tap.servedNext(fresh.ID), "the new room starts stopped: it only probes")

		r.gateQuietly(fresh, false)
		r.gateQuietly(old, false)
		r.tap.signal("play", "agent", "", "ctl-play-all")
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(fresh, bandonce.DefaultKey(ids[0])))
		assert.Equal(t, 1, r.repliesTo(old, bandonce.DefaultKey(ids[1])))
	})
}

// G8: one room's trouble never keeps a signal from the others. Room 0's
// handler ignores its context for an hour, room 1's /next hangs, room 2's
// handler is well behaved: an agent-wide interrupt reaches all three at
// once.
func TestAnAgentWideSignalReachesEveryRoomWhateverOneRoomIsDoing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 3)
		var mu sync.Mutex
		causes := map[string]error{}
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if m.RoomID == w.rooms[0].ID {
				time.Sleep(time.Hour) // deaf to ctx
			} else {
				<-ctx.Done()
			}
			mu.Lock()
			causes[m.RoomID] = context.Cause(ctx)
			mu.Unlock()
			return nil, ctx.Err()
		}
		ids := []string{w.say(w.rooms[0], "stuck"), w.say(w.rooms[2], "fine")}
		stop := startOnce(w, w.socketConfig(h))
		time.Sleep(time.Second)
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
		hung := w.say(w.rooms[1], "behind a hung /next")
		time.Sleep(time.Second)
		require.Equal(t, 1, w.band.FaultsFired()["next/delay"])

		require.NoError(t, w.band.Interrupt(w.agent.ID, ""))
		time.Sleep(time.Second)
		mu.Lock()
		assert.ErrorIs(t, causes[w.rooms[2].ID], bandonce.ErrInterrupted, "the healthy room is interrupted at once")
		mu.Unlock()
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, ids[1]))

		time.Sleep(2 * time.Hour)
		require.NoError(t, stop())
		mu.Lock()
		assert.ErrorIs(t, causes[w.rooms[0].ID], bandonce.ErrInterrupted, "the stuck room was interrupted too")
		// The room whose /next hung had no turn in flight when the signal
		// came: the message it fetched afterwards is not consumed by it
		// (it may postdate the interrupt) but handled, here until shutdown.
		assert.ErrorIs(t, causes[w.rooms[1].ID], bandonce.ErrShutdown)
		mu.Unlock()
		assert.Equal(t, fakeband.StatusProcessing, w.band.Status(w.agent.ID, hung), "nothing is marked on shutdown")
		assert.Empty(t, w.replies(w.rooms[0]))
	})
}

// G12: a message Band keeps serving though it is settled must not spin
// the room: a stale /next, and a processed mark that keeps failing. A
// busy loop would never let virtual time pass; the counts bound the rate.
func TestNoBusyLoopOnAMessageBandKeepsServing(t *testing.T) {
	t.Run("stale next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			id := r.say(room, "done once")
			stop := r.run(nil)
			time.Sleep(time.Second)
			require.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Probability: 1, Kind: fakeband.StaleNext})
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID)) // an interrupt between cycles changes nothing
			before := r.tap.count("next", room.ID)
			r.say(room, "wakes the room") // its push sends the room into the stale serves
			time.Sleep(10 * time.Minute)
			require.NoError(t, stop())
			assert.Less(t, r.tap.count("next", room.ID)-before, 400, "at most a few a second: backoff, not a spin")
			assert.Equal(t, 1, r.h.callsOf(id), "never handled again")
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		})
	})
	t.Run("failing ack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, time.Hour)
			room := r.rooms[0]
			id := r.say(room, "interrupted")
			stop := r.run(nil)
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Probability: 1, Kind: fakeband.FailBefore, Status: 503})
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(10 * time.Minute)
			require.NoError(t, stop())
			assert.Less(t, r.tap.count("next", room.ID), 400)
			assert.Equal(t, 1, r.h.callsOf(id))
		})
	})
}

// G13: a failed processing mark is not a handler failure and is never
// charged. With a budget of one failure, two failed claims later the
// handler still gets its attempt.
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

// G15: Python ran the handler for participant events even while stopped.
// The shell runs it only for messages: joins, leaves and new rooms while
// stopped start nothing.
func TestParticipantChangesWhileStoppedStartNoHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		r.tap.signal("stop", "agent", "", "")
		guest := r.band.AddHuman("guest")
		require.NoError(t, r.band.AddParticipant(room.ID, guest.ID))
		require.NoError(t, r.band.RemoveParticipant(room.ID, guest.ID))
		r.band.AddRoom("new", r.human, r.agent.ID)
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())
		assert.Empty(t, r.h.allCalls())
		assert.Empty(t, r.out.all())
	})
}
