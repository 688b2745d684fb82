package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/band-once/bandonce/internal/keyguard"
)

// RetryOptions bounds the retries of a Doer from NewRetryDoer. Values are
// taken as given; the shell applies its own defaults before it gets here.
type RetryOptions struct {
	// MaxAttempts is how many times one request is tried in all. Values
	// below 1 mean 1: send once.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles
	// for each later one.
	BaseDelay time.Duration
	// MaxDelay caps every backoff ceiling. Zero or less means no wait.
	MaxDelay time.Duration
	// MaxRetryAfter caps a server's Retry-After on 429 and 503. Zero or
	// less ignores the header and uses the jittered backoff instead.
	MaxRetryAfter time.Duration
	// Seed seeds the jitter. Zero means a seed drawn at random.
	Seed uint64
	// Logger receives one Debug record per retry. Nil discards.
	Logger *slog.Logger
	// Observe, if set, is called after every try with how it went, on the
	// caller's goroutine; it must not block.
	Observe func(ctx context.Context, t Try)
}

// NewRetryDoer returns a Doer that sends through a copy of hc (nil means
// http.DefaultClient) that refuses to follow a redirect to another scheme,
// host or port, where the key would go with it.
//
// A request with retry true is tried up to MaxAttempts times: again after
// a transport error that is not its context ending, a 429, or a 5xx other
// than 501. Between tries it waits a full-jitter delay, uniform in
// [0, min(MaxDelay, BaseDelay·2^n)] before retry n (from 0), unless a
// 429 or 503 carries a Retry-After, which is waited instead, capped at
// MaxRetryAfter. Any other status is returned at once, and once the tries
// run out the last response itself is returned, so the caller still sees
// its status and body.
//
// A request with retry false is sent exactly once: it is the reply POST,
// and Band has no idempotency key to make a second send safe.
//
// When the request's context ends, the error returned matches
// context.Cause of that context.
func NewRetryDoer(hc *http.Client, o RetryOptions) Doer {
	// net/http would carry X-API-Key along a redirect to any host.
	hc = keyguard.SameOriginRedirects(hc)
	o.MaxAttempts = max(o.MaxAttempts, 1)
	o.BaseDelay, o.MaxDelay = max(o.BaseDelay, 0), max(o.MaxDelay, 0)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return &retryDoer{hc: hc, opts: o, log: log}
}

type retryDoer struct {
	hc   *http.Client
	opts RetryOptions
	log  *slog.Logger
	// deprecated holds the endpoints whose deprecation was logged.
	deprecated sync.Map
}

func (d *retryDoer) Do(req *http.Request, endpoint string, retry bool) (*http.Response, error) {
	j := &callJitter{seed: d.opts.Seed, req: req}
	endpoint = endpointOf(req, endpoint)
	ctx := req.Context()
	if ctx.Err() != nil {
		return nil, withCause(ctx, ctx.Err())
	}
	if !retry || d.opts.MaxAttempts == 1 {
		began := time.Now()
		resp, err := d.hc.Do(req)
		d.observe(ctx, endpoint, 1, began, resp, err)
		if err != nil {
			return nil, withCause(ctx, err)
		}
		d.noteDeprecation(ctx, endpoint, resp)
		return resp, nil
	}

	// The first try goes out as it is: most calls need no other, and
	// the retrying client costs a dozen allocations before it sends. It
	// is judged and waited after exactly as retryablehttp does it below.
	if req.Body != nil && req.GetBody == nil {
		return d.retry(ctx, j, req, endpoint, 0, nil) // a body that cannot be sent twice but by the retrying client
	}
	began := time.Now()
	resp, err := d.hc.Do(req)
	d.observe(ctx, endpoint, 1, began, resp, err)
	again, cause := d.retryable(ctx, resp, err)
	if !again {
		if err != nil {
			d.hc.CloseIdleConnections() // as retryablehttp does after a failure
			return nil, withCause(ctx, err)
		}
		d.noteDeprecation(ctx, endpoint, resp)
		return resp, nil
	}
	if err == nil {
		drainBody(resp.Body)
	}
	if err := d.pause(ctx, j, endpoint, 0, resp, cause); err != nil {
		return nil, err
	}
	next := *req // each try its own request, as retryablehttp copies them
	if req.GetBody != nil {
		if next.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return d.retry(ctx, j, &next, endpoint, 1, cause)
}

// retryable judges a try as the retrying client's CheckRetry: whether to
// try again, and the cause the next retry's log line names.
func (d *retryDoer) retryable(ctx context.Context, resp *http.Response, err error) (bool, any) {
	if ctx.Err() != nil {
		return false, nil
	}
	if err != nil {
		// A refused redirect is refused again on every try, and a
		// request its start check withheld is not to be sent.
		var notSent *NotSentError
		return !errors.Is(err, keyguard.ErrCrossOriginRedirect) && !errors.As(err, &notSent), err
	}
	if retryableStatus(resp.StatusCode) {
		// Built here, not taken from resp.Status, whose form depends on
		// the RoundTripper.
		return true, strings.TrimSpace(strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode))
	}
	return false, nil
}

// backoff is the wait before retry n (from 0), logged.
func (d *retryDoer) backoff(ctx context.Context, j *callJitter, endpoint string, n int, resp *http.Response, cause any) time.Duration {
	wait := d.wait(j, n, resp)
	d.log.LogAttrs(ctx, slog.LevelDebug, "band: retrying request",
		slog.String("endpoint", endpoint),
		slog.Int("attempt", n+1),
		slog.Duration("wait", wait),
		slog.Any("cause", cause))
	return wait
}

// pause waits before retry n as retryablehttp does between its tries.
func (d *retryDoer) pause(ctx context.Context, j *callJitter, endpoint string, n int, resp *http.Response, cause any) error {
	timer := time.NewTimer(d.backoff(ctx, j, endpoint, n, resp, cause))
	select {
	case <-ctx.Done():
		timer.Stop()
		d.hc.CloseIdleConnections()
		return withCause(ctx, ctx.Err())
	case <-timer.C:
		return nil
	}
}

// drainBody reads a little of a body it discards, so its connection can
// be used again, as retryablehttp does.
func drainBody(body io.ReadCloser) {
	defer body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4096))
}

// retry sends the tries after the first sent (0 or 1) through
// retryablehttp, numbered and waited as if it had sent those itself.
func (d *retryDoer) retry(ctx context.Context, j *callJitter, req *http.Request, endpoint string, sent int, lastCause any) (*http.Response, error) {
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, err
	}
	// One retryablehttp.Client per call: its hooks then close over this
	// request's last failure, which the retry log line reports.
	var clock *tryClock // set when tries are observed
	rc := &retryablehttp.Client{
		HTTPClient: d.hc,
		Logger:     nil, // its own logger would write to stderr
		RetryMax:   d.opts.MaxAttempts - 1 - sent,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if clock != nil {
				d.observe(ctx, endpoint, clock.try, clock.began, resp, err)
			}
			again, cause := d.retryable(ctx, resp, err)
			if cause != nil {
				lastCause = cause
			}
			return again, nil
		},
		Backoff: func(_, _ time.Duration, n int, resp *http.Response) time.Duration {
			return d.backoff(ctx, j, endpoint, n+sent, resp, lastCause)
		},
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	if d.opts.Observe != nil {
		clock = &tryClock{offset: sent}
		rc.RequestLogHook = clock.start
	}
	resp, err := rc.Do(rreq)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, withCause(ctx, err)
	}
	d.noteDeprecation(ctx, endpoint, resp)
	return resp, nil
}

// wait is the delay before retry n (from 0) after resp (nil after a
// transport error).
func (d *retryDoer) wait(j *callJitter, n int, resp *http.Response) time.Duration {
	if resp != nil && d.opts.MaxRetryAfter > 0 &&
		(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return min(ra, d.opts.MaxRetryAfter)
		}
	}
	return j.upTo(backoffCeiling(d.opts.BaseDelay, d.opts.MaxDelay, n))
}

// retryableStatus: throttling and server faults may pass; 501 says the
// server will never do this.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests ||
		(code >= 500 && code != http.StatusNotImplemented)
}

// withCause makes err match ctx's cause once ctx is done. retryablehttp
// returns the bare ctx.Err() when a wait is cut short, which would lose
// the cause that tells an interrupt from a shutdown.
func withCause(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}
