package bandonce_test

// What a shutdown does: when Run's context ends, running handlers may finish
// for ShutdownTimeout, then are cancelled with ErrShutdown, and nothing is
// marked.

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: control-semantics.md §5.1.6 (Python interrupt suite).
func TestShutdownCancelsTheHandlerWithoutMarking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		id := r.say(r.rooms[0], "cut off")
		stop := r.run(func(c *bandonce.Config) { c.ShutdownTimeout = 2 * time.Second })
		require.Equal(t, 1, r.h.busy())
		require.NoError(t, stop(), "a graceful shutdown")

		assert.Zero(t, r.h.busy(), "no handler is left running")
		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrShutdown)
		assert.Equal(t, []string{"processing"}, r.marksOf(id))
		assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id), "served again after a restart")
	})
}

// Origin: the failure model's edges (failure_test.go).
func TestShutdownLetsHandlersFinishThenCancelsWithErrShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		quick := w.say(w.rooms[0], "quick")
		slow := w.say(w.rooms[1], "slow")
		var cause error
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			d := 2 * time.Second
			if m.Body() == "slow" {
				d = time.Hour
			}
			select {
			case <-time.After(d):
				return echo(ctx, m)
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return nil, cause
			}
		})
		cfg.ShutdownTimeout = 10 * time.Second
		stop := w.start(cfg)
		time.Sleep(time.Second) // both handlers are running
		start := time.Now()
		require.NoError(t, stop(), "a shutdown the caller asked for is clean")
		assert.Equal(t, 10*time.Second, time.Since(start), "phase two began at the shutdown timeout")
		assert.ErrorIs(t, cause, bandonce.ErrShutdown)
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, quick), "the quick handler finished in the grace period")
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(quick)))
		assert.Equal(t, "processing", w.band.Status(w.agent.ID, slow), "nothing is marked on shutdown")
		assert.Zero(t, w.repliesTo(w.rooms[1], bandonce.DefaultKey(slow)))
	})
}

// More handlers run at once than there are slots to talk to Band
// (MaxConcurrentRooms above MaxRequestsInFlight): each takes a slot back
// when it returns, to post or mark, and Run still ends.
func TestShutdownEndsWithMoreHandlersRunningThanRequestSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rooms = 3
		w := newWorld(t, rooms)
		for _, r := range w.rooms {
			w.say(r, "a")
		}
		var running sync.WaitGroup
		running.Add(rooms)
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			running.Done()
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		cfg.MaxRequestsInFlight = 1
		cfg.ShutdownTimeout = time.Second
		stop := w.start(cfg)
		running.Wait() // every room's handler runs, none holding a slot
		require.NoError(t, stop(), "Run ends once the handlers are cancelled")
	})
}

// A shutdown lets the running handler finish for ShutdownTimeout. A person
// who interrupts or stops the agent in that grace, or another connection
// that takes the agent over, still cuts the turn off with nothing sent:
// the socket stays up until the rounds have ended.
func TestASignalInTheShutdownGraceStillReachesTheHandler(t *testing.T) {
	for _, c := range []struct {
		name   string
		signal func(r *rig, room fakeband.Room) error
		cause  error
	}{
		{"interrupt", func(r *rig, room fakeband.Room) error { return r.band.Interrupt(r.agent.ID, room.ID) }, bandonce.ErrInterrupted},
		{"stop", func(r *rig, room fakeband.Room) error { return r.band.StopRoom(room.ID) }, bandonce.ErrStopped},
		{"supersede", func(r *rig, _ fakeband.Room) error { r.band.Supersede(r.agent.ID); return nil }, bandonce.ErrSuperseded},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, 5*time.Second)
				room := r.rooms[0]
				id := r.say(room, "slow")
				stop := r.run(func(cfg *bandonce.Config) { cfg.ShutdownTimeout = 30 * time.Second })
				require.Equal(t, 1, r.h.busy(), "the handler runs")
				done := make(chan error, 1)
				go func() { done <- stop() }()
				time.Sleep(time.Second) // the shutdown's grace: the handler still runs
				require.Equal(t, 1, r.h.busy())
				require.NoError(t, c.signal(r, room))
				<-done

				assert.Equal(t, []error{c.cause}, r.h.causes(id), "the signal cancelled the handler")
				assert.Zero(t, r.repliesTo(room, bandonce.DefaultKey(id)), "nothing posted after the signal")
			})
		})
	}
}
