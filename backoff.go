package bandonce

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/band-once/bandonce/internal/lifecycle"
)

// Backoff paces the handler attempts of a message whose handler failed.
// After the n-th failure (n from 1) the message waits a full-jitter
// exponential delay, uniform in [0, min(MaxDelay, BaseDelay·2^(n-1))],
// before Band serves it again; an error that says how long to wait (see
// [RetryAfter]) is honoured instead, up to MaxRetryAfter. While a message
// waits, its room waits with it (Band serves a failed message again at the
// head of its room), other rooms carry on, and no goroutine is held for it.
// Config.MaxAttempts bounds the attempts; [Permanent] skips the wait and
// dead-letters at once.
//
// The defaults (BaseDelay 1 s, MaxDelay 2 min, MaxRetryAfter 5 min, with
// MaxAttempts 10) ride out a dependency that is down for minutes: the
// nine waits of ten attempts add up to about 3 minutes on average and at
// most about 6 (docs/how-it-works.md, "When a turn fails", has the
// schedule as measured and the reasoning).
type Backoff struct {
	// BaseDelay is the ceiling of the first wait. Zero means 1 s.
	BaseDelay time.Duration
	// MaxDelay caps every wait's ceiling. Zero means 2 minutes.
	MaxDelay time.Duration
	// MaxRetryAfter caps a wait an error asks for. Zero means 5 minutes.
	MaxRetryAfter time.Duration
}

// Defaults of Backoff and of Config.MaxAttempts.
const (
	defaultMaxAttempts       = 10
	defaultBackoffBase       = time.Second
	defaultBackoffMax        = 2 * time.Minute
	defaultBackoffRetryAfter = 5 * time.Minute
)

func (b Backoff) withDefaults() Backoff {
	b.BaseDelay = cmp.Or(b.BaseDelay, defaultBackoffBase)
	b.MaxDelay = cmp.Or(b.MaxDelay, defaultBackoffMax)
	b.MaxRetryAfter = cmp.Or(b.MaxRetryAfter, defaultBackoffRetryAfter)
	return b
}

func (b Backoff) validate() error {
	switch {
	case b.BaseDelay < 0, b.MaxDelay < 0, b.MaxRetryAfter < 0:
		return &ConfigError{Field: "Backoff", Reason: "delays must not be negative"}
	case b.MaxDelay > 0 && b.BaseDelay > b.MaxDelay:
		return &ConfigError{Field: "Backoff.BaseDelay", Reason: "must not exceed MaxDelay"}
	}
	return nil
}

// wait is how long a message waits after its failures-th failure, err.
func (b Backoff) wait(j *lifecycle.Jitter, failures int, err error) time.Duration {
	if d := retryAfterOf(err); d > 0 {
		return min(d, b.MaxRetryAfter)
	}
	return j.Backoff(b.BaseDelay, b.MaxDelay, failures-1)
}

// RetryAfter returns err with a hint that the message's next handler
// attempt should wait d, such as the Retry-After of a model API's 429: a
// handler returns it, and the shell waits d (capped by
// Backoff.MaxRetryAfter) instead of its own backoff. The failure still
// counts against Config.MaxAttempts. RetryAfter of a nil err is nil; a d
// of zero or less leaves the shell's backoff in charge.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, After: d}
}

// RetryAfterError is the error RetryAfter returns.
type RetryAfterError struct {
	// Err is the failure.
	Err error
	// After is how long the next attempt should wait.
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns After, so that the shell finds the hint through any
// error that wraps e.
func (e *RetryAfterError) RetryAfter() time.Duration { return e.After }

// retryAfterOf is the wait a handler's error asks for, zero if none: the
// first in its chain that has a RetryAfter() method (a *RetryAfterError,
// or any error of the handler's own), else an *APIError's Retry-After (a
// room tool's 429).
func retryAfterOf(err error) time.Duration {
	var hinted interface{ RetryAfter() time.Duration }
	if errors.As(err, &hinted) {
		if d := hinted.RetryAfter(); d > 0 {
			return d
		}
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		return apiErr.RetryAfter
	}
	return 0
}
