package bandonce

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// paceWatch says when Band throttles the whole agent. Every request passes
// one budget (Config.MaxRequestsInFlight), so a 429 on any route slows
// every room: the log says so once when the pace first drops, with the
// rate, and once when it is lifted, and Hooks.Throttle hears every cut.
type paceWatch struct {
	log     *slog.Logger
	limiter *wire.Limiter
	hook    func(throttled bool, rate float64)

	mu        sync.Mutex
	since     time.Time // when the pace first dropped; zero while unthrottled
	throttled int       // the limiter's 429 count then
}

func newPaceWatch(log *slog.Logger, l *wire.Limiter, hook func(bool, float64)) *paceWatch {
	return &paceWatch{log: log, limiter: l, hook: hook}
}

// changed is the limiter's OnPace.
func (w *paceWatch) changed(paced bool, rate float64) {
	w.mu.Lock()
	was := !w.since.IsZero()
	var lasted time.Duration
	var refused int
	switch {
	case paced && !was:
		w.since, w.throttled = time.Now(), w.limiter.Throttled()-1
	case !paced && was:
		lasted, refused = time.Since(w.since), w.limiter.Throttled()-w.throttled
		w.since = time.Time{}
	}
	w.mu.Unlock()
	switch {
	case paced && !was:
		w.log.Warn("bandonce: Band is throttling the agent (429): pacing every request of every room",
			"rate_per_second", roundRate(rate))
	case paced:
		w.log.Debug("bandonce: Band throttles again: pace cut", "rate_per_second", roundRate(rate))
	case was:
		w.log.Warn("bandonce: Band no longer throttles the agent: requests unpaced",
			"throttled_for", lasted.Round(time.Millisecond), "answered_429", refused)
	}
	if w.hook != nil {
		if !paced {
			rate = 0
		}
		w.hook(paced, rate)
	}
}

// roundRate rounds a pace for the log: two significant digits are enough.
func roundRate(r float64) float64 {
	if r >= 10 {
		return math.Round(r)
	}
	return math.Round(r*10) / 10
}
