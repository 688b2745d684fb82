package bandonce

import (
	"log/slog"
	"math"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// paceWatch says when Band throttles the whole agent. Every request passes
// one budget (Config.MaxRequestsInFlight), so a 429 on any route slows
// every room: the log says so once when the pace first drops, with the
// rate, and once when it is lifted, and Hooks.Throttle hears every cut.
type paceWatch struct {
	log  *slog.Logger
	hook func(throttled bool, rate float64)
}

func newPaceWatch(log *slog.Logger, hook func(bool, float64)) *paceWatch {
	return &paceWatch{log: log, hook: hook}
}

// changed is the limiter's OnPace. The limiter counts the episode under
// its lock, so a 429 answered while this runs cannot shift the figures.
func (w *paceWatch) changed(p wire.Pace) {
	switch {
	case p.First():
		w.log.Warn("bandonce: Band is throttling the agent (429): pacing every request of every room",
			"rate_per_second", roundRate(p.Rate))
	case p.Paced:
		w.log.Debug("bandonce: Band throttles again: pace cut", "rate_per_second", roundRate(p.Rate))
	default:
		w.log.Warn("bandonce: Band no longer throttles the agent: requests unpaced",
			"throttled_for", time.Since(p.Since).Round(time.Millisecond), "answered_429", p.Refused)
	}
	if w.hook != nil {
		w.hook(p.Paced, p.Rate)
	}
}

// roundRate rounds a pace for the log: two significant digits are enough.
func roundRate(r float64) float64 {
	if r >= 10 {
		return math.Round(r)
	}
	return math.Round(r*10) / 10
}
