package wire

import (
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// callJitter is one call's stream of waits, drawn from a source seeded by
// the Doer's seed and the request's method and path, made at the first
// retry. Each call has a stream of its own, so the waits of calls that
// retry at the same instant (many rooms at once) do not depend on which
// goroutine draws first: with a fixed seed a run waits alike every time.
type callJitter struct {
	seed uint64
	req  *http.Request
	j    *jitter
}

func (c *callJitter) upTo(ceiling time.Duration) time.Duration {
	if c.j == nil {
		c.j = newJitter(requestSeed(c.seed, c.req.Method, c.req.URL.Path))
	}
	return c.j.upTo(ceiling)
}

// requestSeed mixes a request's method and path into seed.
func requestSeed(seed uint64, method, path string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(method))
	_, _ = h.Write([]byte{' '})
	_, _ = h.Write([]byte(path))
	return seed ^ h.Sum64()
}

// jitter draws full-jitter waits from one seeded source: one call's
// (see callJitter), so the sequence of waits depends only on the seed and
// the call.
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
