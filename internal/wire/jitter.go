package wire

import (
	"math/rand/v2"
	"sync"
	"time"
)

// jitter draws full-jitter waits from one seeded source. Requests of many
// rooms draw from it at once, so it is locked; with one request at a time
// the sequence of waits depends only on the seed.
type jitter struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newJitter(seed uint64) *jitter {
	if seed == 0 {
		seed = rand.Uint64()
	}
	// The second PCG word only has to differ from the first; any fixed
	// odd constant does.
	return &jitter{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// upTo returns a wait uniform in [0, ceiling].
func (j *jitter) upTo(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return time.Duration(j.rng.Uint64N(uint64(ceiling) + 1))
}

// backoffCeiling is min(maxDelay, base·2^n), computed without overflow.
func backoffCeiling(base, maxDelay time.Duration, n int) time.Duration {
	if base <= 0 || maxDelay <= 0 {
		return 0
	}
	if n < 0 {
		n = 0
	}
	// base·2^n > maxDelay  ⇔  base > maxDelay>>n, and the shift cannot
	// overflow the way the product can.
	if n >= 63 || base > maxDelay>>n {
		return maxDelay
	}
	return base << n
}
