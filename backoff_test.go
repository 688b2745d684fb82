package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// attemptLog is a handler that fails each message's first fails[id]
// calls (every call when absent and failAll is set) with err(id, n), and
// records when each call started, in the bubble's time.
type attemptLog struct {
	mu      sync.Mutex
	fails   map[string]int
	failAll bool
	err     func(id string, n int) error
	starts  map[string][]time.Time
}

func newAttemptLog(failAll bool) *attemptLog {
	return &attemptLog{fails: map[string]int{}, failAll: failAll, starts: map[string][]time.Time{},
		err: func(string, int) error { return errors.New("orders service: connection refused") }}
}

func (a *attemptLog) handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	a.mu.Lock()
	a.starts[m.ID] = append(a.starts[m.ID], time.Now())
	n := len(a.starts[m.ID])
	fail := a.failAll
	if left, ok := a.fails[m.ID]; ok {
		fail = left > 0
		a.fails[m.ID] = left - 1
	}
	a.mu.Unlock()
	if fail {
		return nil, a.err(m.ID, n)
	}
	return echo(ctx, m)
}

// gaps is the time between the starts of a message's calls.
func (a *attemptLog) gaps(id string) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(a.starts[id]); i++ {
		out = append(out, a.starts[id][i].Sub(a.starts[id][i-1]))
	}
	return out
}

func (a *attemptLog) calls(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.starts[id])
}

// downFor is an attempt log whose handler fails with RetryAfter(wait): the
// first attempt of each of ids, or every attempt of every message when no
// id is given, as a dependency that is down and says for how long.
func downFor(wait time.Duration, ids ...string) *attemptLog {
	h := newAttemptLog(len(ids) == 0)
	for _, id := range ids {
		h.fails[id] = 1
	}
	h.err = func(string, int) error { return bandonce.RetryAfter(errors.New("down"), wait) }
	return h
}

// startWith starts the rig's shell with h as its handler, at once.
func (r *rig) startWith(h bandonce.Handler) (stop func() error) {
	cfg := r.config()
	cfg.Handler = h
	return startOnce(r.world, cfg)
}

func TestAFailedMessageWaitsAFullJitterExponentialBackoffBeforeEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "order status?")
		h := newAttemptLog(true)
		cfg := w.config(h.handle)
		cfg.MaxAttempts = 8
		cfg.Backoff = bandonce.Backoff{BaseDelay: time.Second, MaxDelay: 10 * time.Second}
		stop := startOnce(w, cfg)
		time.Sleep(10 * time.Minute)
		require.NoError(t, stop())

		gaps := h.gaps(id)
		require.Len(t, gaps, 7, "eight attempts, seven waits")
		var total time.Duration
		for i, g := range gaps {
			ceiling := min(time.Second<<i, 10*time.Second)
			assert.LessOrEqual(t, g, ceiling, "wait %d is at most min(MaxDelay, BaseDelay·2^%d)", i+1, i)
			total += g
		}
		assert.Greater(t, total, 5*time.Second, "the waits grow: their ceilings add up to 47 s")
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id), "dead-lettered after the eighth")
	})
}

func TestTheWaitsAreJitteredAcrossMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rooms = 40
		w := newWorld(t, rooms)
		h := newAttemptLog(false)
		var ids []string
		for _, room := range w.rooms {
			id := w.say(room, "hi")
			h.fails[id] = 1
			ids = append(ids, id)
		}
		cfg := w.config(h.handle)
		cfg.Backoff = bandonce.Backoff{BaseDelay: 8 * time.Second}
		cfg.MaxConcurrentRooms = rooms
		stop := startOnce(w, cfg)
		time.Sleep(time.Minute)
		require.NoError(t, stop())

		lo, hi := time.Hour, time.Duration(0)
		for i, id := range ids {
			require.Len(t, h.gaps(id), 1, "one failure, one wait, then the answer")
			g := h.gaps(id)[0]
			lo, hi = min(lo, g), max(hi, g)
			assert.Equal(t, 1, w.repliesTo(w.rooms[i], bandonce.DefaultKey(id)))
		}
		assert.LessOrEqual(t, hi, 8*time.Second, "the first wait is at most BaseDelay")
		assert.Greater(t, hi-lo, 4*time.Second, "full jitter spreads the first waits over [0, BaseDelay]")
	})
}

func TestAWaitAnErrorAsksForIsHonouredAndCapped(t *testing.T) {
	for name, tc := range map[string]struct {
		err  func(n int) error
		want time.Duration
	}{
		"RetryAfter": {func(int) error { return bandonce.RetryAfter(errors.New("model API: 429"), 40*time.Second) }, 40 * time.Second},
		"capped":     {func(int) error { return bandonce.RetryAfter(errors.New("model API: 429"), 24*time.Hour) }, 5 * time.Minute},
		"wrapped APIError": {func(int) error {
			return fmt.Errorf("listing participants: %w", &bandonce.APIError{Status: 429, RetryAfter: 90 * time.Second})
		}, 90 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				id := w.say(w.rooms[0], "hi")
				h := newAttemptLog(false)
				h.fails[id] = 1
				h.err = func(_ string, n int) error { return tc.err(n) }
				stop := startOnce(w, w.config(h.handle))
				time.Sleep(time.Hour)
				require.NoError(t, stop())

				require.Equal(t, []time.Duration{tc.want}, h.gaps(id))
				assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
			})
		})
	}
}

func TestRetryAfterOfNilIsNilAndKeepsItsCause(t *testing.T) {
	assert.NoError(t, bandonce.RetryAfter(nil, time.Second))
	cause := errors.New("quota")
	err := bandonce.RetryAfter(cause, 3*time.Second)
	assert.ErrorIs(t, err, cause)
	var ra *bandonce.RetryAfterError
	require.ErrorAs(t, err, &ra)
	assert.Equal(t, 3*time.Second, ra.After)
}

func TestAWaitingMessageHoldsItsRoomWhileOtherRoomsGoOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		held, other := w.rooms[0], w.rooms[1]
		first := w.say(held, "first")
		h := downFor(10*time.Minute, first)
		cfg := w.config(h.handle)
		cfg.DisableSocket = false // pushes wake the held room early
		stop := startOnce(w, cfg)
		time.Sleep(time.Minute)
		require.Equal(t, 1, h.calls(first))
		second := w.say(held, "second")
		elsewhere := w.say(other, "elsewhere")
		time.Sleep(time.Minute)
		synctest.Wait()

		assert.Equal(t, 1, w.repliesTo(other, bandonce.DefaultKey(elsewhere)), "another room carries on")
		assert.Zero(t, h.calls(second), "the message behind the waiting one waits too")
		assert.Equal(t, 1, h.calls(first), "a push does not cut the wait short")

		time.Sleep(10 * time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(held, bandonce.DefaultKey(first)))
		assert.Equal(t, 1, w.repliesTo(held, bandonce.DefaultKey(second)))
		posts := w.replies(held)
		require.Len(t, posts, 2)
		assert.Contains(t, posts[0].Content, "echo: first", "answered in order")
	})
}

func TestAnInterruptConsumesAWaitingMessageAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "flaky")
		h := downFor(time.Hour, id)
		stop := r.startWith(h.handle)
		time.Sleep(time.Minute)
		require.Equal(t, 1, h.calls(id))
		start := time.Now()
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		for r.band.Status(r.agent.ID, id) != fakeband.StatusProcessed {
			time.Sleep(100 * time.Millisecond)
			require.Less(t, time.Since(start), 30*time.Minute, "the interrupt must not wait for the retry")
		}
		require.NoError(t, stop())

		assert.Less(t, time.Since(start), time.Minute, "consumed at once, not after the hour")
		assert.Equal(t, 1, h.calls(id), "no further attempt")
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Failed, bandonce.Interrupted}, r.out.of(id))
		assert.Empty(t, r.replies(room))
	})
}

func TestAStopHoldsAWaitingMessageUntilPlay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "flaky")
		h := downFor(time.Minute, id)
		stop := r.startWith(h.handle)
		time.Sleep(10 * time.Second)
		require.Equal(t, 1, h.calls(id))
		require.NoError(t, r.band.StopRoom(room.ID))
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, h.calls(id), "a stopped room makes no attempt, though the wait is over")

		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 2, h.calls(id))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

func TestShutdownDoesNotWaitForAWaitingMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		h := downFor(time.Hour)
		stop := startOnce(w, w.config(h.handle))
		time.Sleep(time.Minute)
		require.Equal(t, 1, h.calls(id))
		start := time.Now()
		require.NoError(t, stop())
		assert.Less(t, time.Since(start), time.Second, "Run returns at once")
		assert.Equal(t, fakeband.StatusFailed, w.band.Status(w.agent.ID, id), "left for Band to serve again")
	})
}

func TestDrainReportsWhatItLeftWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		id := w.say(w.rooms[1], "hi")
		h := downFor(time.Hour)
		s, err := bandonce.New(w.config(h.handle))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := s.Drain(ctx)
		require.NoError(t, err)

		assert.False(t, res.Drained, "a waiting message keeps the run from being drained")
		require.Len(t, res.Waiting, 1)
		got := res.Waiting[0]
		assert.Equal(t, w.rooms[1].ID, got.RoomID)
		assert.Equal(t, id, got.MessageID)
		assert.Equal(t, 1, got.Failures)
		assert.ErrorContains(t, got.Err, "down")
		assert.WithinDuration(t, start.Add(5*time.Minute), got.RetryAt, time.Minute, "the hour asked for, capped by MaxRetryAfter")
	})
}

func TestAPermanentErrorIsDeadLetteredWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		h := newAttemptLog(true)
		h.err = func(string, int) error { return bandonce.Permanent(errors.New("no such order")) }
		var dead sync.WaitGroup
		dead.Add(1)
		cfg := w.config(h.handle)
		cfg.Hooks.DeadLetter = func(bandonce.Outcome) { dead.Done() }
		start := time.Now()
		stop := startOnce(w, cfg)
		dead.Wait()
		assert.Less(t, time.Since(start), time.Second, "no backoff before a permanent failure is dead-lettered")
		require.NoError(t, stop())
		assert.Equal(t, 1, h.calls(id))
	})
}

func TestWaitingMessagesHoldNoGoroutines(t *testing.T) {
	count := func(rooms int) int {
		n := 0
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, rooms)
			h := downFor(time.Hour)
			for _, room := range w.rooms {
				w.say(room, "hi")
			}
			stop := startOnce(w, w.config(h.handle))
			time.Sleep(time.Minute)
			synctest.Wait()
			n = runtime.NumGoroutine()
			require.NoError(t, stop())
		})
		return n
	}
	// Both are more rooms than the shell has workers, which start as
	// rounds need them.
	few, many := count(100), count(400)
	assert.LessOrEqual(t, many, few+2, "400 waiting messages cost no more goroutines than 100 (%d against %d)", many, few)
}

func TestNewRejectsABadBackoff(t *testing.T) {
	for field, b := range map[string]bandonce.Backoff{
		"Backoff":           {MaxRetryAfter: -1},
		"Backoff.BaseDelay": {BaseDelay: time.Minute, MaxDelay: time.Second},
	} {
		_, err := bandonce.New(bandonce.Config{APIKey: "k", Handler: echo, Backoff: b})
		var ce *bandonce.ConfigError
		require.ErrorAs(t, err, &ce, field)
		assert.Equal(t, field, ce.Field)
	}
}

// TestTheDefaultBackoffRidesOutAnOutageOfMinutes measures the default
// schedule: ten attempts of an always-failing handler, under 100 seeds.
// docs/how-it-works.md quotes what it logs (go test -run ThisTest -v).
func TestTheDefaultBackoffRidesOutAnOutageOfMinutes(t *testing.T) {
	const seeds = 100
	var windows []time.Duration
	perWait := make([][]time.Duration, 9)
	for seed := range uint64(seeds) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, 1)
			id := w.say(w.rooms[0], "hi")
			h := newAttemptLog(true)
			cfg := w.config(h.handle)
			cfg.Retry.Seed = seed + 1
			began := time.Now()
			stop := startOnce(w, cfg)
			for w.band.Status(w.agent.ID, id) != fakeband.StatusProcessed && time.Since(began) < time.Hour {
				time.Sleep(10 * time.Second) // virtual: until the tenth failure dead-letters it
			}
			// Longer than any wait the backoff or a Retry-After can ask
			// for: an eleventh attempt would show.
			time.Sleep(10 * time.Minute)
			require.NoError(t, stop())
			gaps := h.gaps(id)
			require.Len(t, gaps, 9, "ten attempts by default")
			var window time.Duration
			for i, g := range gaps {
				window += g
				perWait[i] = append(perWait[i], g)
			}
			windows = append(windows, window)
			assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id), "dead-lettered after the tenth")
		})
	}
	slices.Sort(windows)
	median := windows[seeds/2]
	t.Logf("window from the first attempt to the tenth, %d seeds: min %s, median %s, max %s",
		seeds, windows[0].Round(time.Second), median.Round(time.Second), windows[seeds-1].Round(time.Second))
	for i, ws := range perWait {
		slices.Sort(ws)
		t.Logf("wait %d: ceiling %s, median %s, max %s", i+1, min(time.Second<<i, 2*time.Minute),
			ws[seeds/2].Round(100*time.Millisecond), ws[seeds-1].Round(100*time.Millisecond))
	}
	assert.Greater(t, median, 2*time.Minute, "half the messages ride out an outage of more than two minutes")
	assert.Greater(t, windows[0], 30*time.Second, "none gives up within half a minute")
	assert.LessOrEqual(t, windows[seeds-1], 367*time.Second, "the ceilings add up to 6 min 7 s")
}
