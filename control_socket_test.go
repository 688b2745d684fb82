package bandonce_test

// How signals arrive on the socket: the control topic is joined first on
// every connection, a push that lands while the socket connects is applied,
// and a storm of drops loses nothing.

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.3.1 (Python bridge suite), §5.4.4 (Python link suite).
// The control topic is joined first, on every connection, so its handler is in
// place before any room's pushes.
func TestTheControlTopicIsJoinedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 0)
		stop := r.run(nil)
		r.band.DropSockets(r.agent.ID)
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		joins := r.tap.joined()
		control := "agent_control:" + r.agent.ID
		require.Len(t, joins, 8, "four topics, twice")
		assert.Equal(t, control, joins[0])
		assert.Equal(t, control, joins[4], "and first again after the reconnect")
		assert.ElementsMatch(t, []string{"agent_rooms:" + r.agent.ID, "chat_room:" + r.rooms[0].ID, "chat_room:" + r.rooms[1].ID}, joins[1:4])
	})
}

// Origin: control-semantics.md §5.3.2 (Python bridge suite).
// A push that lands while the socket is still connecting, right after the
// control join is answered, is applied.
func TestASignalPushedWhileTheSocketConnectsIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "slow")
		// Hold the upgrade long enough that the shell stops waiting for
		// the socket and serves the room: the handler is running when the
		// socket comes up.
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointSocket, Nth: 1, Kind: fakeband.Delay, Delay: 20 * time.Second})
		var pushed atomic.Int32
		r.tap.onControlJoined = func() {
			if pushed.Add(1) == 1 {
				assert.NoError(t, r.tap.pushRaw("agent.control",
					`{"mode":"interrupt","scope":"room","agent_id":"`+r.agent.ID+`","room_id":"`+room.ID+`"}`))
			}
		}
		stop := r.run(nil)
		time.Sleep(10 * time.Second)
		require.Equal(t, 1, r.h.busy())
		require.Zero(t, pushed.Load(), "the socket is still connecting")
		time.Sleep(20 * time.Second)
		require.NoError(t, stop())
		require.EqualValues(t, 1, pushed.Load())
		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
	})
}

// A thousand socket drops, each after the shell has reconnected, with
// messages said all through the storm: every message is answered exactly
// once, and the shell ends with no more goroutines than it began with
// (goleak checks the rest when the package's tests end).
func TestAThousandSocketDropsLoseNoMessageAndLeakNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		h := newTurns(0)
		out := &outcomes{}
		cfg := w.socketConfig(h.handle)
		cfg.Hooks.Outcome = out.add
		stop := startOnce(w, cfg)
		time.Sleep(time.Second)
		synctest.Wait()
		baseline := runtime.NumGoroutine()

		var said []string
		for drop := range 1000 {
			if drop%10 == 0 {
				said = append(said, w.say(w.rooms[drop/10%2], fmt.Sprint("storm ", drop)))
			}
			w.band.DropSockets(w.agent.ID)
			// Wait until the shell has dialled again and joined, so every
			// drop closes a live connection.
			for w.band.Requests()[fakeband.EndpointSocket] < drop+2 {
				time.Sleep(50 * time.Millisecond)
			}
			synctest.Wait()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// A leak per drop would show as a thousand more; a few may be in
		// flight at any moment.
		assert.Less(t, runtime.NumGoroutine(), baseline+10, "no goroutine piled up over the storm")
		require.NoError(t, stop())

		drops := 0
		for _, e := range w.band.Events() {
			if e.Kind == fakeband.EventDrop && e.Detail == "1" {
				drops++
			}
		}
		assert.Equal(t, 1000, drops, "every drop closed a live connection")
		require.Len(t, said, 100)
		for i, id := range said {
			room := w.rooms[i%2]
			assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "message %d", i)
			assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied}, out.of(id), "message %d", i)
		}
	})
}

// An idle room's next look, a slow resync while the socket was up, is
// brought in to the poll interval when the socket goes down and stays
// down: a message said meanwhile is answered within seconds, not at the
// end of the minute's resync.
func TestAnIdleRoomPollsOnceTheSocketIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		stop := startOnce(w, w.socketConfig(echo))
		time.Sleep(10 * time.Second) // up, joined, the room idle
		synctest.Wait()
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointSocket, Probability: 1, Kind: fakeband.FailBefore, Status: 503})
		w.band.DropSockets(w.agent.ID)
		time.Sleep(time.Second)
		synctest.Wait()
		id := w.say(w.rooms[0], "said while the socket is down")
		time.Sleep(10 * time.Second) // five poll intervals; the resync is 60 s
		synctest.Wait()
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)), "answered by polling")
		require.NoError(t, stop())
	})
}
