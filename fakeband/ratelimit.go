package fakeband

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// RateLimit throttles each agent's REST calls with a token bucket, as
// Band's load balancer throttles a burst of calls (band-api.md §1.4, GH
// #107): every agent key has a bucket of Burst tokens, refilled at
// PerSecond (calls with keys the fake does not know share one bucket); a
// call finding it empty is answered 429 before anything is applied. Time is the real clock (virtual inside a testing/synctest
// bubble), not Options.Now, which only stamps records. The socket upgrade
// and the admin API are never throttled. 429s count in FaultsFired as
// "<endpoint>/rate_limit".
type RateLimit struct {
	// PerSecond is how many calls per second each agent may sustain, at
	// least one a day.
	PerSecond float64 `json:"per_second"`
	// Burst is how many calls an agent may make at once (0 means 1).
	Burst int `json:"burst,omitempty"`
	// RetryAfter sends Retry-After with the whole seconds until the next
	// token; Band's load balancer was reported to send none.
	RetryAfter bool `json:"retry_after,omitempty"`
	// EmptyBody answers with no body at all, like the load balancer;
	// otherwise the body is Band's error envelope, code too_many_requests.
	EmptyBody bool `json:"empty_body,omitempty"`
}

func (l RateLimit) validate() error {
	switch {
	case math.IsNaN(l.PerSecond) || math.IsInf(l.PerSecond, 0) || l.PerSecond <= 0:
		return fmt.Errorf("%w: rate_limit.per_second %v is not a positive number", ErrBadFault, l.PerSecond)
	case l.PerSecond < minPerSecond:
		return fmt.Errorf("%w: rate_limit.per_second %v is below one call a day (%v)", ErrBadFault, l.PerSecond, minPerSecond)
	case l.Burst < 0:
		return fmt.Errorf("%w: rate_limit.burst %d is negative", ErrBadFault, l.Burst)
	}
	return nil
}

// minPerSecond is the slowest rate a RateLimit takes, one call a day, so
// that the Retry-After it announces is a day at most.
const minPerSecond = 1.0 / (24 * 60 * 60)

func (l RateLimit) burst() float64 { return float64(max(l.Burst, 1)) }

// bucket is one agent key's tokens as of a moment.
type bucket struct {
	tokens float64
	at     time.Time
}

// limiter is the active rate limit and its buckets. Guarded by b.mu.
type limiter struct {
	limit   *RateLimit
	buckets map[string]*bucket // by X-API-Key
}

// SetRateLimit throttles every agent's REST calls from now on (see
// RateLimit), with full buckets; nil lifts the limit. ClearFaults lifts it
// too.
func (b *Band) SetRateLimit(l *RateLimit) error {
	if l != nil {
		if err := l.validate(); err != nil {
			return err
		}
		copied := *l
		l = &copied
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rate = limiter{limit: l, buckets: map[string]*bucket{}}
	b.noteFaultsLocked()
	return nil
}

// throttleLocked takes a token from key's bucket, or returns the 429 the
// call gets instead.
func (b *Band) throttleLocked(ep Endpoint, key string) *Fault {
	l := b.rate.limit
	if l == nil || !ep.isAgent() {
		return nil
	}
	if b.byKey[key] == nil {
		key = "" // unknown keys share one bucket: a bucket for each would grow without bound
	}
	now := time.Now()
	bk := b.rate.buckets[key]
	if bk == nil {
		bk = &bucket{tokens: l.burst(), at: now}
		b.rate.buckets[key] = bk
	}
	bk.tokens = min(l.burst(), bk.tokens+now.Sub(bk.at).Seconds()*l.PerSecond)
	bk.at = now
	if bk.tokens >= 1 {
		bk.tokens--
		return nil
	}
	b.faults.fired[string(ep)+"/rate_limit"]++
	f := &Fault{Kind: FailBefore, Status: 429, EmptyBody: l.EmptyBody}
	if l.RetryAfter {
		wait := math.Ceil((1 - bk.tokens) / l.PerSecond)
		f.RetryAfter = strconv.Itoa(max(int(wait), 1))
	}
	return f
}
