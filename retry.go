package bandonce

import (
	"cmp"
	"time"

	"github.com/band-once/bandonce/band"
)

// RetryPolicy bounds the retries of transient HTTP failures (transport
// errors, 429 and 5xx) on reads and marks. It is [band.RetryPolicy], so
// the shell and its room-tools client retry alike: MaxAttempts tries in
// all (default 5); full-jitter exponential waits, the n-th uniform in
// [0, min(MaxDelay, BaseDelay·2^n)], with BaseDelay (default 200 ms) and
// MaxDelay (default 5 s); a server's Retry-After honoured up to
// MaxRetryAfter (default MaxDelay); the jitter seeded by Seed (zero draws
// one at random; set it for reproducible runs). The reply POST is never
// re-sent by this policy: after an ambiguous outcome the shell reads the
// room again and posts only if the reply is still absent.
type RetryPolicy = band.RetryPolicy

func validateRetry(p RetryPolicy) error {
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

func retryDefaults(p RetryPolicy) RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, 5)
	p.BaseDelay = cmp.Or(p.BaseDelay, 200*time.Millisecond)
	p.MaxDelay = cmp.Or(p.MaxDelay, 5*time.Second)
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, p.MaxDelay)
	return p
}
