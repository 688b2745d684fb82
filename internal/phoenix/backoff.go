package phoenix

import (
	"math/rand/v2"
	"time"
)

// jitter draws "full jitter" backoffs: a uniform wait in
// [0, min(max, base·2^attempt)). Spreading reconnects over the whole
// window keeps a fleet of agents from stampeding Band after an outage.
// It is not safe for concurrent use; the Client guards it with its mutex.
type jitter struct {
	base, max time.Duration
	rng       *rand.Rand
}

func newJitter(base, max time.Duration, seed uint64) *jitter {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &jitter{base: base, max: max, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// delay is the wait before retry number attempt (0 for the first retry).
func (j *jitter) delay(attempt int) time.Duration {
	window := j.base
	for i := 0; i < attempt && window < j.max; i++ {
		if window > j.max/2 { // doubling would pass the cap (or overflow)
			window = j.max
			break
		}
		window *= 2
	}
	window = min(window, j.max)
	if window <= 0 {
		return 0
	}
	return time.Duration(j.rng.Int64N(int64(window)))
}
