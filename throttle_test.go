package bandonce_test

import (
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// pace records what Hooks.Throttle heard.
type pace struct {
	mu     sync.Mutex
	events []paceEvent
}

type paceEvent struct {
	throttled bool
	rate      float64
}

func (p *pace) hook(throttled bool, rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, paceEvent{throttled, rate})
}

func (p *pace) all() []paceEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]paceEvent(nil), p.events...)
}

func TestAThrottledAgentWarnsOnceWithTheRateAndOnceWhenThePaceIsLifted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		// A burst of 429s on /next, with Retry-After, then Band accepts
		// every request again.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Count: 6, Kind: fakeband.FailBefore, Status: 429, RetryAfter: "1"})
		for _, r := range w.rooms {
			w.say(r, "hi")
		}
		var p pace
		var l logs
		cfg := w.config(echo)
		cfg.Logger = l.logger()
		cfg.Hooks.Throttle = p.hook
		stop := w.start(cfg)
		runFor(2 * time.Minute) // idle polls every 2 s: Band answers them all
		require.NoError(t, stop())
		for _, r := range w.rooms {
			assert.Len(t, w.replies(r), 1)
		}
		assert.Equal(t, 6, w.band.FaultsFired()["next/fail_before"])

		assert.Equal(t, 1, l.count(slog.LevelWarn, "Band is throttling the agent"), "one warning as the pace drops")
		assert.True(t, l.has(slog.LevelWarn, "Band is throttling the agent", "rate_per_second="), "with the rate")
		assert.Equal(t, 1, l.count(slog.LevelWarn, "Band no longer throttles the agent"), "one as it is lifted")
		assert.True(t, l.has(slog.LevelWarn, "no longer throttles", "answered_429=6"))

		events := p.all()
		require.GreaterOrEqual(t, len(events), 2)
		assert.True(t, events[0].throttled)
		assert.Greater(t, events[0].rate, 0.0)
		assert.Equal(t, paceEvent{false, 0}, events[len(events)-1], "the pace is lifted")
		for _, e := range events[:len(events)-1] {
			assert.True(t, e.throttled, "lifted once only, at the end")
		}
	})
}
