package bandonce_test

// A signal is applied once per correlation id: a duplicate, a stale copy or
// a push delivered twice changes nothing, and a signal without one is
// applied every time.

import (
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.2.6 (Python runtime control suite).
// A stale copy of a stop, replayed with its correlation id after the play,
// must not stop the room again.
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
		time.Sleep(time.Second) // less than a stop's grace: a probe cannot have lifted it
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

// Origin: control-semantics.md §5.2.7 (Python runtime control suite), §5.3.13 (Python bridge suite).
func TestDistinctCorrelationIDsAreEachApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "ctl-1", "ctl-2")
		for i := range causes {
			require.Len(t, causes[i], 1, "message %d", i)
			assert.ErrorIs(t, causes[i][0], bandonce.ErrInterrupted)
		}
	})
}

// Origin: control-semantics.md §5.2.9 (Python runtime control suite), §5.3.14 (Python bridge suite).
func TestSignalsWithoutACorrelationIDAreAppliedEveryTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "", "")
		for i := range causes {
			require.Len(t, causes[i], 1, "message %d", i)
			assert.ErrorIs(t, causes[i][0], bandonce.ErrInterrupted)
		}
	})
}

// Origin: control-semantics.md §5.3.11 (Python bridge suite), §6.1 review finding (j).
// A stale duplicate must not cancel the newer cycle.
func TestAStaleDuplicateDoesNotCancelANewerCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := interruptEachOf(t, "ctl-1", "ctl-1")
		require.Len(t, causes[0], 1)
		assert.ErrorIs(t, causes[0][0], bandonce.ErrInterrupted)
		assert.Empty(t, causes[1], "the duplicate was dropped")
	})
}

// Origin: control-semantics.md §5.3.12 (Python bridge suite).
// Band does not deduplicate; a push delivered twice is applied once.
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

// Origin: control-semantics.md §2 (scope and dedup rules), a rule no Python scenario names.
// The correlation id is recorded before routing, so a signal that applies to
// no room still spends it.
func TestACorrelationIDIsSpentEvenWhenItsSignalAppliesNowhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "room", "ghost", "ctl-x")
		r.tap.signal("stop", "room", room.ID, "ctl-x")
		id := r.say(room, "not stopped")
		time.Sleep(time.Second) // less than a stop's grace: a probe cannot have lifted it
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Origin: issue 3, item 4.
// The dedup set holds at least 256 ids, and is bounded: a replayed stop is
// dropped after 255 other signals, and applied again once a thousand more have
// pushed it out.
func TestTheDedupSetRemembersAtLeast256IDsAndIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		r.tap.signal("play", "room", room.ID, "ctl-play")
		for i := range 254 {
			r.tap.signal("play", "room", "ghost", fmt.Sprint("ctl-ghost-", i))
		}
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		first := r.say(room, "remembered")
		time.Sleep(time.Second) // less than a stop's grace: a probe cannot have lifted it
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(first)), "256 ids back, the replay is still dropped")

		for i := range 1000 {
			r.tap.signal("play", "room", "ghost", fmt.Sprint("ctl-more-", i))
		}
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		second := r.say(room, "forgotten")
		// Band's gate is open, so the room's first probe would lift this
		// stop once its grace is over; until then it holds.
		time.Sleep(time.Second)
		assert.Zero(t, r.h.callsOf(second), "evicted: the old id is applied again")
		require.NoError(t, stop())
	})
}
