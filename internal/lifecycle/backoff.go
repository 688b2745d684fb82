package lifecycle

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Jitter draws full-jitter exponential backoffs from a seeded source. It is
// safe for concurrent use.
type Jitter struct {
	mu  sync.Mutex
	rnd *rand.Rand
}

// NewJitter returns a Jitter seeded with seed.
func NewJitter(seed uint64) *Jitter {
	return &Jitter{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Ceiling is min(max, base·2^n), the upper bound of the n-th wait.
func Ceiling(base, max time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	c := base
	for i := 0; i < n && c < max; i++ {
		c *= 2
	}
	return min(c, max)
}

// Backoff returns a wait uniform in [0, Ceiling(base, max, n)].
func (j *Jitter) Backoff(base, max time.Duration, n int) time.Duration {
	c := Ceiling(base, max, n)
	if c <= 0 {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return time.Duration(j.rnd.Int64N(int64(c) + 1))
}
