package bandonce_test

// Which rooms a signal reaches: its scope and room id decide; an agent-wide
// signal reaches every room whatever one room is doing, and a signal for a
// room the agent is not in, or has left, changes nothing.

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.2.1 (Python runtime control suite).
func TestAgentWideInterruptReachesEveryRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, time.Hour)
		require.NoError(t, r.band.Interrupt(r.agent.ID, ""))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		for i, id := range ids {
			require.Len(t, r.h.causes(id), 1, "room %d", i)
			assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
			assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
		}
	})
}

// Origin: control-semantics.md §5.2.2 (Python runtime control suite).
func TestRoomStopReachesOnlyThatRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		require.NoError(t, r.band.StopRoom(r.rooms[1].ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Empty(t, r.h.causes(ids[0]), "r1 ran on")
		assert.Equal(t, 1, r.repliesTo(r.rooms[0], bandonce.DefaultKey(ids[0])))
		require.Len(t, r.h.causes(ids[1]), 1)
		assert.ErrorIs(t, r.h.causes(ids[1])[0], bandonce.ErrStopped)
	})
}

// Origin: control-semantics.md §5.2.3 (Python runtime control suite).
func TestAgentScopeSignalWithARoomIDReachesOnlyThatRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		r.tap.signal("interrupt", "agent", r.rooms[0].ID, "ctl-r1")
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		require.Len(t, r.h.causes(ids[0]), 1)
		assert.ErrorIs(t, r.h.causes(ids[0])[0], bandonce.ErrInterrupted)
		assert.Empty(t, r.h.causes(ids[1]), "r2 ran on")
		assert.Equal(t, 1, r.repliesTo(r.rooms[1], bandonce.DefaultKey(ids[1])))
	})
}

// Origin: control-semantics.md §5.2.4 (Python runtime control suite), §5.3.19 (Python bridge suite).
// A room the agent is not in is a logged no-op, whatever the mode.
func TestSignalsForARoomTheAgentIsNotInChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		for _, mode := range []string{"interrupt", "stop", "play"} {
			r.tap.signal(mode, "room", "ghost", "")
		}
		time.Sleep(time.Minute)
		r.h.setWork(0)
		more := r.say(r.rooms[0], "still served")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		for i, id := range ids {
			assert.Empty(t, r.h.causes(id))
			assert.Equal(t, 1, r.repliesTo(r.rooms[i], bandonce.DefaultKey(id)))
		}
		assert.Equal(t, 1, r.repliesTo(r.rooms[0], bandonce.DefaultKey(more)))
		assert.True(t, r.logs.has(slog.LevelInfo, "applies to no room", "ghost"))
	})
}

// Origin: control-semantics.md §5.2.5 (Python runtime control suite).
func TestPlayForOneRoomWakesOnlyThatRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 0)
		stop := r.run(nil)
		r1, r2 := r.rooms[0].ID, r.rooms[1].ID
		before1, before2 := r.tap.count("next", r1), r.tap.count("next", r2)
		require.NoError(t, r.band.PlayRoom(r1))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		assert.Equal(t, before1+1, r.tap.count("next", r1), "one catch-up in r1")
		assert.Equal(t, before2, r.tap.count("next", r2))
	})
}

// Origin: control-semantics.md §5.2.11 (Python runtime control suite).
// In Python an execution without control methods must not raise; here the
// nearest thing is a room whose loop has ended because the agent left it.
func TestSignalsForARoomTheAgentLeftAreHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 0)
		gone, kept := r.rooms[0], r.rooms[1]
		stop := r.run(nil)
		require.NoError(t, r.band.RemoveParticipant(gone.ID, r.agent.ID))
		time.Sleep(time.Second)
		before := r.tap.count("next", gone.ID)
		for _, mode := range []string{"interrupt", "stop", "play"} {
			r.tap.signal(mode, "room", gone.ID, "")
		}
		id := r.say(kept, "still served")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, before, r.tap.count("next", gone.ID), "the left room is not woken")
		assert.Equal(t, 1, r.repliesTo(kept, bandonce.DefaultKey(id)))
	})
}

// Origin: control-semantics.md §5.3.8 (Python bridge suite).
func TestRoomScopedInterruptLeavesOtherRoomsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		require.NoError(t, r.band.Interrupt(r.agent.ID, r.rooms[0].ID))
		time.Sleep(time.Second)
		assert.Equal(t, 1, r.h.busy(), "r2 is still running")
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.ErrorIs(t, r.h.causes(ids[0])[0], bandonce.ErrInterrupted)
		assert.Equal(t, 1, r.repliesTo(r.rooms[1], bandonce.DefaultKey(ids[1])))
	})
}

// Origin: control-semantics.md §5.3.9 (Python bridge suite).
func TestAgentWideStopStopsEveryRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, time.Hour)
		r.tap.signal("stop", "agent", "", "ctl-all")
		for _, room := range r.rooms {
			r.gateQuietly(room, true)
		}
		var nexts, served [2]int
		for i, room := range r.rooms {
			nexts[i], served[i] = r.tap.count("next", room.ID), r.tap.servedNext(room.ID)
		}
		later := [2]string{r.say(r.rooms[0], "later 1"), r.say(r.rooms[1], "later 2")}
		time.Sleep(5 * time.Minute)
		require.NoError(t, stop())
		for i, id := range ids {
			require.Len(t, r.h.causes(id), 1)
			assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrStopped)
			assert.Zero(t, r.h.callsOf(later[i]))
			r.probesOnly(t, r.rooms[i], nexts[i], served[i], 6)
		}
	})
}

// Origin: control-semantics.md §5.3.10 (Python bridge suite).
// Scope room without a room id is a warning and a no-op.
func TestRoomScopeSignalWithoutARoomIsANoOp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		r.tap.signal("interrupt", "room", "", "")
		r.tap.signal("stop", "room", "", "")
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		for i, id := range ids {
			assert.Empty(t, r.h.causes(id))
			assert.Equal(t, 1, r.repliesTo(r.rooms[i], bandonce.DefaultKey(id)))
		}
		assert.True(t, r.logs.has(slog.LevelWarn, "room-scope signal without room_id"))
	})
}

// Origin: control-semantics.md §5.3.16 (Python bridge suite).
// Band cleared both rooms' gates but its room-scope pushes were lost; one
// agent-wide play without a room resumes every room at once, before either
// room's own probe would have found its gate open.
func TestAgentWidePlayResumesEveryRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 0)
		stop := r.run(nil)
		r.tap.signal("stop", "agent", "", "")
		var ids []string
		for _, room := range r.rooms {
			require.NoError(t, r.band.StopRoom(room.ID))
			ids = append(ids, r.say(room, "while stopped"))
		}
		r.band.InjectSocket(fakeband.SocketFault{Event: "agent.control", Probability: 1, Kind: fakeband.LosePush})
		for _, room := range r.rooms {
			require.NoError(t, r.band.PlayRoom(room.ID))
		}
		synctest.Wait()
		require.Empty(t, r.h.allCalls(), "the plays were lost")
		r.band.ClearFaults()
		r.tap.signal("play", "agent", "", "")
		time.Sleep(time.Second) // less than a stop's grace
		require.NoError(t, stop())
		for i, room := range r.rooms {
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(ids[i])))
		}
	})
}

// Origin: control-semantics.md §5.4.3 (Python link suite).
// With no room to apply it to, a signal is harmless, and the rooms that come
// later are served.
func TestASignalWithNoRoomsIsHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, 0)
		stop := r.run(nil)
		r.tap.signal("interrupt", "agent", "", "")
		r.tap.signal("play", "agent", "", "")
		r.tap.signal("stop", "room", "nowhere", "")
		room := r.band.AddRoom("later", r.human, r.agent.ID)
		time.Sleep(time.Second)
		id := r.say(room, "hello")
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Origin: control-semantics.md §6.3 gap G8.
// One room's trouble never keeps a signal from the others. Room 0's handler
// ignores its context for an hour, room 1's /next hangs, room 2's handler is
// well behaved: an agent-wide interrupt reaches all three at once.
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
