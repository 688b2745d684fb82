package bandonce_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// drainIn runs Drain in the background; the returned wait gives its
// result once it returns on its own, or fails the test if it has not
// returned by then.
func drainIn(t *testing.T, s *bandonce.Shell, ctx context.Context) (wait func() (bandonce.DrainResult, error), returned func() bool) {
	t.Helper()
	type out struct {
		res bandonce.DrainResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := s.Drain(ctx)
		done <- out{res, err}
	}()
	var got *out
	returned = func() bool {
		synctest.Wait()
		if got == nil {
			select {
			case o := <-done:
				got = &o
			default:
			}
		}
		return got != nil
	}
	wait = func() (bandonce.DrainResult, error) {
		t.Helper()
		require.True(t, returned(), "Drain is still running")
		return got.res, got.err
	}
	return wait, returned
}

func TestDrainAnswersWhatIsWaitingThenReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 3, time.Second)
		var ids []string
		for i, room := range r.rooms {
			for j := range i + 1 {
				ids = append(ids, r.say(room, "waiting "+string(rune('a'+j))))
			}
		}
		s, err := bandonce.New(r.config())
		require.NoError(t, err)
		wait, _ := drainIn(t, s, context.Background())
		time.Sleep(time.Minute)
		res, err := wait()
		require.NoError(t, err)

		assert.True(t, res.Drained)
		assert.Equal(t, 3, res.Rooms)
		assert.Empty(t, res.Stopped)
		assert.Equal(t, len(ids), res.Outcomes[bandonce.Replied])
		for i, room := range r.rooms {
			assert.Len(t, r.replies(room), i+1)
		}
		for _, id := range ids {
			assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
		}
		assert.True(t, r.logs.has(slog.LevelInfo, "every room drained"))
	})
}

func TestDrainWithNothingWaitingReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 0)
		s, err := bandonce.New(r.config())
		require.NoError(t, err)
		wait, _ := drainIn(t, s, context.Background())
		time.Sleep(time.Second)
		res, err := wait()
		require.NoError(t, err)
		assert.True(t, res.Drained)
		assert.Equal(t, 2, res.Rooms)
		assert.Empty(t, res.Outcomes)
	})
}

// A room stopped during the run counts as drained: its message waits
// for play, and the run says so.
func TestDrainTreatsAStoppedRoomAsDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, time.Hour)
		stoppedRoom, other := r.rooms[0], r.rooms[1]
		cut := r.say(stoppedRoom, "long work")
		done := r.say(other, "quick work")
		s, err := bandonce.New(r.config())
		require.NoError(t, err)
		wait, returned := drainIn(t, s, context.Background())
		time.Sleep(2 * time.Second)
		require.False(t, returned(), "both handlers are still working")
		r.h.setWork(0) // the other room's next call is quick; the running ones keep working
		require.NoError(t, r.band.StopRoom(stoppedRoom.ID))
		time.Sleep(time.Hour + time.Minute)
		res, err := wait()
		require.NoError(t, err)

		assert.True(t, res.Drained)
		assert.Equal(t, []string{stoppedRoom.ID}, res.Stopped)
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, cut), "left for replay")
		assert.Equal(t, 1, r.repliesTo(other, bandonce.DefaultKey(done)))
		assert.True(t, r.logs.has(slog.LevelInfo, "some rooms are stopped", stoppedRoom.ID))
	})
}

// A message whose processed mark keeps failing is owed a mark: the run
// goes on until the mark lands, or until its context ends.
func TestDrainWaitsForAMarkThatKeepsFailing(t *testing.T) {
	for _, recovers := range []bool{true, false} {
		name := map[bool]string{true: "until it lands", false: "until the context ends"}[recovers]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, 0)
				room := r.rooms[0]
				id := r.say(room, "hard to ack")
				r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Probability: 1, Kind: fakeband.FailBefore, Status: 503})
				s, err := bandonce.New(r.config())
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
				defer cancel()
				wait, returned := drainIn(t, s, ctx)
				time.Sleep(10 * time.Minute)
				require.False(t, returned(), "a mark is owed")
				assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "replied once; only the mark is retried")

				if recovers {
					r.band.ClearFaults()
				}
				time.Sleep(30 * time.Minute)
				res, err := wait()
				require.NoError(t, err)
				assert.Equal(t, recovers, res.Drained)
				assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "never posted twice")
				want := fakeband.StatusProcessing
				if recovers {
					want = fakeband.StatusProcessed
				}
				assert.Equal(t, want, r.band.Status(r.agent.ID, id))
			})
		})
	}
}

// A room the agent leaves during the run no longer keeps it going.
func TestDrainForgetsARoomTheAgentLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, 10*time.Minute)
		left, kept := r.rooms[0], r.rooms[1]
		r.say(left, "never finished here")
		s, err := bandonce.New(r.config())
		require.NoError(t, err)
		wait, returned := drainIn(t, s, context.Background())
		time.Sleep(time.Second)
		require.False(t, returned())
		require.NoError(t, r.band.RemoveParticipant(left.ID, r.agent.ID))
		time.Sleep(11 * time.Minute)
		res, err := wait()
		require.NoError(t, err)
		assert.True(t, res.Drained)
		assert.Empty(t, r.replies(left), "Band refused the post: the agent was gone")
		assert.Empty(t, r.replies(kept))
	})
}
