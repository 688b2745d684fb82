package bandonce

import (
	"cmp"
	"time"
)

// RetryPolicy bounds the retries of transient HTTP failures (transport
// errors, 429 and 5xx) on reads and marks. Waits are full-jitter
// exponential: uniform in [0, min(MaxDelay, BaseDelay·2^n)]. The reply POST
// is never re-sent by this policy: after an ambiguous outcome the shell
// reads the room again and posts only if the reply is still absent.
type RetryPolicy struct {
	// MaxAttempts is how many times one request is tried in all. Zero
	// means 5.
	MaxAttempts int
	// BaseDelay is the first backoff ceiling. Zero means 200 ms.
	BaseDelay time.Duration
	// MaxDelay caps every backoff ceiling. Zero means 5 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a server's Retry-After hint. Zero means MaxDelay.
	MaxRetryAfter time.Duration
	// Seed seeds the jitter. Zero means a seed drawn at random; set it
	// for reproducible runs.
	Seed uint64
}

func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 0:
		return &ConfigError{Field: "Retry.MaxAttempts", Reason: "must not be negative"}
	case p.BaseDelay < 0, p.MaxDelay < 0, p.MaxRetryAfter < 0:
		return &ConfigError{Field: "Retry", Reason: "delays must not be negative"}
	case p.MaxDelay > 0 && p.BaseDelay > p.MaxDelay:
		return &ConfigError{Field: "Retry.BaseDelay", Reason: "must not exceed MaxDelay"}
	}
	return nil
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, 5)
	p.BaseDelay = cmp.Or(p.BaseDelay, 200*time.Millisecond)
	p.MaxDelay = cmp.Or(p.MaxDelay, 5*time.Second)
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, p.MaxDelay)
	return p
}
