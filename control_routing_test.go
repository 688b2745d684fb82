package bandonce_test

// Routing, dedup and wiring: the Python runtime's control suite (§5.2),
// its bridge suite (§5.3, where "a forward in flight" is the handler in
// flight) and its link suite (§5.4), translated to the shell.

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// twoBusyRooms starts a shell whose handler works for work on one message
// in each of two rooms, and returns the two message ids.
func twoBusyRooms(t *testing.T, work time.Duration) (r *rig, ids [2]string, stop func() error) {
	r = newRig(t, 2, work)
	ids = [2]string{r.say(r.rooms[0], "in r1"), r.say(r.rooms[1], "in r2")}
	stop = r.run(nil)
	require.Equal(t, 2, r.h.busy(), "both handlers run")
	return r, ids, stop
}

// §5.2.1
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

// §5.2.2
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

// §5.2.3
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

// §5.2.4 and §5.3.19: a room the agent is not in is a logged no-op,
// whatever the mode.
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

// §5.2.5
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

// §5.2.6: a stale copy of a stop, replayed with its correlation id after
// the play, must not stop the room again.
func TestTheSameCorrelationIDIsAppliedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		stopID := r.lastCorrelation(fakeband.EventStop)
		require.NotEmpty(t, stopID)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Second)
		r.tap.signal("stop", "room", room.ID, stopID)
		id := r.say(room, "after the replayed stop")
		time.Sleep(time.Second) // less than a stop takes to settle: a probe cannot have lifted it
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "the duplicate was dropped")
		assert.True(t, r.logs.has(slog.LevelDebug, "duplicate control signal dropped", stopID))
	})
}

// interruptEachOf runs two slow messages in one room and pushes the given
// correlation ids as interrupts, one while each message runs. It returns
// the causes each message's handler saw.
func interruptEachOf(t *testing.T, first, second string) [2][]error {
	r := newRig(t, 1, 30*time.Second)
	room := r.rooms[0]
	ids := [2]string{r.say(room, "one"), r.say(room, "two")}
	stop := r.run(nil)
	r.tap.signal("interrupt", "room", room.ID, first)
	time.Sleep(time.Second)
	require.Equal(t, 1, r.h.callsOf(ids[1]), "the second message runs")
	r.tap.signal("interrupt", "room", room.ID, second)
	time.Sleep(time.Minute)
	require.NoError(t, stop())
	return [2][]error{r.h.causes(ids[0]), r.h.causes(ids[1])}
}

// §5.2.7, §5.3.13
func TestDistinctCorrelationIDsAreEachApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "ctl-1", "ctl-2")
		for i := range causes {
			require.Len(t, causes[i], 1, "message %d", i)
			assert.ErrorIs(t, causes[i][0], bandonce.ErrInterrupted)
		}
	})
}

// §5.2.9, §5.3.14
func TestSignalsWithoutACorrelationIDAreAppliedEveryTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "", "")
		for i := range causes {
			require.Len(t, causes[i], 1, "message %d", i)
			assert.ErrorIs(t, causes[i][0], bandonce.ErrInterrupted)
		}
	})
}

// §5.3.11 and review finding (j): a stale duplicate must not cancel the
// newer cycle.
func TestAStaleDuplicateDoesNotCancelANewerCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "ctl-1", "ctl-1")
		require.Len(t, causes[0], 1)
		assert.ErrorIs(t, causes[0][0], bandonce.ErrInterrupted)
		assert.Empty(t, causes[1], "the duplicate was dropped")
	})
}

// §5.3.12: Band does not deduplicate; a push delivered twice is applied
// once.
func TestAPushDeliveredTwiceIsAppliedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		r.band.InjectSocket(fakeband.SocketFault{Event: "agent.control", Nth: 1, Kind: fakeband.DuplicatePush})
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.band.FaultsFired()["socket/duplicate_push"])
		assert.True(t, r.logs.has(slog.LevelDebug, "duplicate control signal dropped", r.lastCorrelation(fakeband.EventInterrupt)))
		assert.Len(t, r.h.causes(id), 1)
		assert.Equal(t, 1, r.countMarks(id, "processed"))
	})
}

// §5.2.8
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

// §5.2.10 and review finding (h): a reconnect while stopped makes no
// catch-up, only the probes of G6, which the platform's gate answers 204.
func TestStopSurvivesAReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		left := r.say(room, "slow")
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
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

// §5.2.11: in Python an execution without control methods must not
// raise; here the nearest thing is a room whose loop has ended because
// the agent left it.
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

// §5.3.1 and §5.4.4: the control topic is joined first, on every
// connection, so its handler is in place before any room's pushes.
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

// §5.3.2: a push that lands while the socket is still connecting, right
// after the control join is answered, is applied.
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

// §5.3.3, §5.3.4: the handler in flight returns a reply after the
// signal; nothing is posted, not even attempted.
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

// §5.3.6
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

// §5.3.7, §5.4.2: a signal is handled on the receive path and makes no
// request of its own; with nothing in flight it changes nothing. The only
// requests a stop leads to are the stopped room's probes, one per
// ResyncInterval.
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

// §5.3.8
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

// §5.3.9
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

// §5.3.10: scope room without a room id is a warning and a no-op.
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

// §5.3.15
func TestRoomPlayHandlesTheMessageThatArrivedWhileStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		id := r.say(room, "m-a")
		time.Sleep(time.Minute)
		require.Zero(t, r.h.callsOf(id))
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(5 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// §5.3.16: Band cleared both rooms' gates but its room-scope pushes were
// lost; one agent-wide play without a room resumes every room at once,
// before either room's own probe would have found its gate open.
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
		time.Sleep(time.Second) // less than a stop takes to settle
		require.NoError(t, stop())
		for i, room := range r.rooms {
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(ids[i])))
		}
	})
}

// §5.3.17
func TestPlayWithNothingPendingRunsNoHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		require.NoError(t, r.band.StopRoom(room.ID))
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Empty(t, r.h.allCalls())
		assert.Empty(t, r.replies(room))
	})
}

// §5.3.18 and review finding (c): play's catch-up runs on the room, not
// on the receive path, so the signals after it apply at once even while
// its /next hangs.
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

// §5.4.1, §5.5.7: a push with every field, and one Band may add later,
// reaches the room as sent.
func TestAControlPushWithEveryFieldReachesTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		require.NoError(t, r.tap.pushRaw("agent.control", `{"type":"agent.control","mode":"interrupt","scope":"room",`+
			`"agent_id":"`+r.agent.ID+`","room_id":"`+room.ID+`","execution_id":"exec-1","reason":"user_requested",`+
			`"correlation_id":"ctl-full","issued_by":{"id":"someone"},"future_field":[1,2]}`))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
		assert.Empty(t, r.invalidReports())
	})
}

// §5.4.3: with no room to apply it to, a signal is harmless, and the
// rooms that come later are served.
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
