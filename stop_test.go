package bandonce_test

// What a stop does: it cancels the handler in flight and leaves its message
// for replay, and the room claims, fetches and starts nothing until play,
// whatever told it: a push, Band's gate after a restart, or a reply Band
// refused as stopped.

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: the first end-to-end signal tests over the fake's socket.
func TestStopLeavesTheMessageAndPlayReplaysInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		room, other := w.rooms[0], w.rooms[1]
		first := w.say(room, "slow one")
		h := &slowHandler{d: time.Minute}
		cfg := w.socketConfig(h.handle)
		cfg.ResyncInterval = time.Hour // count only what the rooms do on their own
		stop := w.start(cfg)
		time.Sleep(time.Second)
		require.NoError(t, w.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		h.setDelay(0)
		during := []string{w.say(room, "while stopped 1"), w.say(room, "while stopped 2")}
		time.Sleep(5 * time.Second)                            // the pushes' probes: 204 behind the gate
		nextBefore := w.band.Requests()[fakeband.EndpointNext] // before the other room wakes
		elsewhere := w.say(other, "other room")
		runFor(10 * time.Minute)

		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrStopped)
		assert.Equal(t, "processing", w.band.Status(w.agent.ID, first), "a stopped message is left for replay")
		assert.Zero(t, len(w.replies(room)), "nothing posted in the stopped room")
		assert.Equal(t, 1, w.repliesTo(other, bandonce.DefaultKey(elsewhere)), "other rooms are unaffected")
		assert.Equal(t, 2, w.band.Requests()[fakeband.EndpointNext]-nextBefore,
			"only the other room's drain (a message, then 204): the stopped room polls nothing but its hourly probe")

		require.NoError(t, w.band.PlayRoom(room.ID))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		replies := w.replies(room)
		require.Len(t, replies, 3)
		for i, id := range append([]string{first}, during...) {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			assert.Contains(t, replies[i].Content, "[dedup_key:"+bandonce.DefaultKey(id)+"]", "replayed in order")
		}
	})
}

// Origin: the gate every claim retry asks (a stop between two tries).
// A claim answered 503 is retried, and every retry asks the room's gate again:
// once a stop reached the room between two tries, the retry is not sent, the
// message stays unclaimed for replay, and play answers it once.
func TestAClaimRetriedAfterAStopReachedTheRoomIsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hello")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Kind: fakeband.FailBefore, Status: http.StatusServiceUnavailable})
		cfg := w.socketConfig(echo)
		var stopped atomic.Bool
		cfg.Hooks.Request = func(_ context.Context, r bandonce.Request) {
			if strings.HasSuffix(r.Endpoint, "/processing") && r.Status == http.StatusServiceUnavailable && !stopped.Swap(true) {
				// Between the first try and its retry, the owner stops
				// the agent in the room; the push reaches it during the
				// retry's backoff.
				assert.NoError(t, w.band.StopRoom(room.ID))
			}
		}
		stop := w.start(cfg)
		time.Sleep(time.Minute)
		require.True(t, stopped.Load(), "the claim was answered 503")
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointProcessing], "the retry of the claim was not sent after the stop")
		assert.NotEqual(t, "processing", w.band.Status(w.agent.ID, id), "never claimed while stopped")
		assert.Zero(t, len(w.replies(room)))

		require.NoError(t, w.band.PlayRoom(room.ID))
		runFor(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Origin: control-semantics.md §5.1.4 (Python interrupt suite), §5.3.5 (Python bridge suite).
// The stopped message is not remembered as done anywhere, so play hands it
// back and it is answered.
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
		assert.False(t, pending, "not recorded as decided")
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

// Origin: control-semantics.md §5.1.7 (Python interrupt suite).
func TestStopSetsTheRoomStoppedAndCancelsTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, said, stop := stoppedRig(t, time.Minute, "slow one")
		id := said[0]
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

// Origin: control-semantics.md §5.1.8 (Python interrupt suite).
// The stop here comes before the platform's gate closes (its push outran the
// gate), so for a moment only the shell's own flag keeps the handler from
// running: the room does not probe until the stop's grace is over, and by
// then the gate is closed.
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

// Origin: control-semantics.md §5.1.10 (Python interrupt suite).
// The shell has no stale sweep, since /next serves processing messages too;
// what must hold is that nothing fetches the stopped message while the room is
// stopped, however many resyncs come due.
func TestWhileStoppedTheLeftMessageIsNeverFetchedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, said, stop := stoppedRig(t, time.Minute, "slow one")
		id := said[0]
		time.Sleep(time.Second)
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		time.Sleep(10 * time.Minute) // ten resync intervals
		require.NoError(t, stop())

		assert.Equal(t, 1, r.h.callsOf(id))
		r.probesOnly(t, room, nexts, served, 10)
		assert.Equal(t, []string{"processing"}, r.marksOf(id))
	})
}

// Origin: control-semantics.md §5.1.14 (Python interrupt suite).
func TestStopDuringABacklogLeavesTheCurrentMessageAndTheRestUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, ids, stop := stoppedRig(t, time.Minute, "bk1", "bk2", "bk3")
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

// Origin: control-semantics.md §5.1.15 (Python interrupt suite), §6.1 review finding (g).
// A stop mid-drain ends the drain. The stop's push comes before the platform's
// gate closes, so /next would serve the stopped message again if the room
// asked before the stop's grace is over.
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

// Origin: control-semantics.md §5.1.17 (Python interrupt suite).
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

// Origin: control-semantics.md §5.2.10 (Python runtime control suite), §6.1 review finding (h).
// A reconnect while stopped makes no catch-up, only the probes of G6, which
// the platform's gate answers 204.
func TestStopSurvivesAReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, said, stop := stoppedRig(t, time.Hour, "slow")
		left := said[0]
		time.Sleep(time.Second)
		nexts, served := r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		sockets := r.band.Requests()[fakeband.EndpointSocket]
		r.band.DropSockets(r.agent.ID)
		time.Sleep(time.Minute)
		require.Greater(t, r.band.Requests()[fakeband.EndpointSocket], sockets, "the shell reconnected")
		later := r.say(room, "while stopped")
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())

		// A probe after the reconnect, one after the push of the new
		// message, one per ResyncInterval: no catch-up.
		r.probesOnly(t, room, nexts, served, 2+6)
		assert.Equal(t, 1, r.h.callsOf(left))
		assert.Zero(t, r.h.callsOf(later))
		assert.Empty(t, r.marksOf(later), "no processing mark")
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, left))
	})
}

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

// Origin: control-semantics.md §6.3 gap G3.
// Python's stale-processing sweep did not look at the stop between messages.
// The shell has no separate sweep: messages a crash left processing come
// through /next like any other, so a stop in the middle of them leaves the
// rest alone, and play takes them up in order.
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

// Origin: control-semantics.md §6.3 gap G5.
// Band refuses replies from a stopped agent with 403. When the stop's push is
// lost, that refusal is the stop: the message is left, not failed, and the
// room waits for play.
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

// Origin: control-semantics.md §6.3 gap G5.
// After a restart the local stop is gone; Band's gate holds instead, for the
// message the stop cut off and for those that came after.
func TestAfterARestartWhileStoppedBandsGateHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, said, stop := stoppedRig(t, time.Hour, "cut off")
		cut := said[0]
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

// Origin: control-semantics.md §6.3 gap G7.
// An agent-wide stop holds for rooms the agent joins later, and for a room it
// leaves and rejoins, until an agent-wide play.
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

// Origin: control-semantics.md §6.3 gap G15.
// Python ran the handler for participant events even while stopped. The shell
// runs it only for messages: joins, leaves and new rooms while stopped start
// nothing.
func TestParticipantChangesWhileStoppedStartNoHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, room, _, stop := stoppedRig(t, 0)
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

// A message given up on stays given up on across a stop, a shutdown and
// a restart on a durable ledger: the stop withheld the room's notice, so
// no record of the notice is there, but the dead letter's own record is,
// and the next life finishes the dead letter instead of running the
// handler again with a fresh budget (which, succeeding, would answer a
// message the ledger still lists as dead).
func TestAMessageGivenUpOnStaysGivenUpAcrossAStopAndARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		path := filepath.Join(t.TempDir(), "agent.ledger")
		var calls atomic.Int32
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if calls.Add(1) == 1 {
				return nil, bandonce.Permanent(errors.New("this request cannot be done"))
			}
			return echo(ctx, m)
		}
		life := func(d time.Duration, during func()) {
			l, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
			require.NoError(t, err)
			cfg := w.socketConfig(h)
			cfg.Ledger = l
			stop := w.start(cfg)
			during()
			time.Sleep(d)
			require.NoError(t, stop())
			require.NoError(t, l.Close())
		}
		// The dead letter's failed mark is slow; the room is stopped while
		// it is in flight, so the room's notice is withheld.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointFailed, Nth: 1, Kind: fakeband.Delay, Delay: 3 * time.Second})
		var id string
		life(30*time.Second, func() {
			time.Sleep(6 * time.Second) // the socket up, the room joined
			id = w.say(room, "do the impossible")
			time.Sleep(time.Second)
			require.NoError(t, w.band.StopRoom(room.ID))
		})
		require.Equal(t, int32(1), calls.Load(), "given up on after one permanent failure")
		require.Empty(t, w.errorEvents(room), "the stop withheld the notice")

		life(time.Minute, func() {
			time.Sleep(6 * time.Second)
			require.NoError(t, w.band.PlayRoom(room.ID))
		})
		assert.Equal(t, int32(1), calls.Load(), "a message given up on is not run again after a restart")
		assert.Equal(t, 0, w.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Len(t, w.errorEvents(room), 1, "the room is told once, after the play")
		l, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer l.Close()
		dead, err := l.DeadLetters(context.Background())
		require.NoError(t, err)
		assert.Len(t, dead, 1, "kept once, for a replay")
	})
}
