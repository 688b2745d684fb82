package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/memnet"
)

var retryOpts = RetryOptions{
	MaxAttempts:   4,
	BaseDelay:     time.Second,
	MaxDelay:      4 * time.Second,
	MaxRetryAfter: 30 * time.Second,
	Seed:          42,
}

// jitterWaits is what a Doer with o must wait before its first k retries
// of the call h when no Retry-After applies: the draws of the call's
// seeded source, in order, under the doubling ceilings.
func jitterWaits(o RetryOptions, h hit, k int) []time.Duration {
	j := newJitter(requestSeed(o.Seed, h.Method, h.Path))
	var out []time.Duration
	for n := range k {
		out = append(out, j.upTo(backoffCeiling(o.BaseDelay, o.MaxDelay, n)))
	}
	return out
}

// The calls the tests below retry, as the stub records them.
var (
	meCall   = hit{Method: http.MethodGet, Path: "/api/v1/agent/me"}
	nextCall = hit{Method: http.MethodGet, Path: "/api/v1/agent/chats/c1/messages/next"}
)

func TestJitterWaitsAreNotTrivial(t *testing.T) {
	// Guards the tests below: waits of all zeros or all the same would let
	// a Doer that ignores the jitter pass them.
	w := jitterWaits(retryOpts, meCall, 3)
	assert.NotEqual(t, w[0], w[1])
	assert.NotEqual(t, w[1], w[2])
	for _, d := range w {
		assert.Positive(t, d)
	}
}

func TestEmptyBody429IsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStub(sequence(answer{status: 429}, ok(200, agentJSON)))
		a, err := s.client(retryOpts).Me(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "a1", a.ID)
		assert.Equal(t, jitterWaits(retryOpts, meCall, 1), s.gaps())
	})
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header func() string // evaluated inside the bubble, for dates
		opts   func(RetryOptions) RetryOptions
		want   func(RetryOptions) time.Duration
	}{
		{
			name: "429 hint above the cap waits exactly MaxRetryAfter", status: 429,
			header: func() string { return "3600" },
			want:   func(o RetryOptions) time.Duration { return o.MaxRetryAfter },
		},
		{
			name: "503 hint below the cap is waited as given", status: 503,
			header: func() string { return "5" },
			want:   func(RetryOptions) time.Duration { return 5 * time.Second },
		},
		{
			name: "HTTP date", status: 429,
			header: func() string { return time.Now().Add(12 * time.Second).UTC().Format(http.TimeFormat) },
			want:   func(RetryOptions) time.Duration { return 12 * time.Second },
		},
		{
			name: "zero hint retries at once", status: 429,
			header: func() string { return "0" },
			want:   func(RetryOptions) time.Duration { return 0 },
		},
		{
			name: "500 ignores the hint", status: 500,
			header: func() string { return "3600" },
			want:   func(o RetryOptions) time.Duration { return jitterWaits(o, nextCall, 1)[0] },
		},
		{
			name: "unparseable hint falls back to jitter", status: 503,
			header: func() string { return "later" },
			want:   func(o RetryOptions) time.Duration { return jitterWaits(o, nextCall, 1)[0] },
		},
		{
			name: "MaxRetryAfter zero ignores the hint", status: 429,
			header: func() string { return "3600" },
			opts:   func(o RetryOptions) RetryOptions { o.MaxRetryAfter = 0; return o },
			want:   func(o RetryOptions) time.Duration { return jitterWaits(o, nextCall, 1)[0] },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := retryOpts
				if tt.opts != nil {
					o = tt.opts(o)
				}
				hint := answer{status: tt.status, header: map[string]string{"Retry-After": tt.header()}}
				s := newStub(sequence(hint, ok(200, `{"data":`+messageJSON+`}`)))
				_, err := s.client(o).Next(t.Context(), "c1")
				require.NoError(t, err)
				assert.Equal(t, []time.Duration{tt.want(o)}, s.gaps())
			})
		})
	}
}

// Reads and marks ride out a burst of 503s; a body is sent again intact.
func TestBurstsOf503OnReadsAndMarksAreRetried(t *testing.T) {
	calls := []struct {
		name    string
		success answer
		call    func(context.Context, *Client) error
	}{
		{"me", ok(200, agentJSON), func(ctx context.Context, c *Client) error { _, err := c.Me(ctx); return err }},
		{"chats", ok(200, `{"data":[{"id":"c1"}],"metadata":{"total_pages":1}}`), func(ctx context.Context, c *Client) error { _, err := c.Chats(ctx); return err }},
		{"next", ok(200, `{"data":`+messageJSON+`}`), func(ctx context.Context, c *Client) error { _, err := c.Next(ctx, "c1"); return err }},
		{"context", ok(200, `{"data":[],"metadata":{"has_more":false}}`), func(ctx context.Context, c *Client) error { _, err := c.Context(ctx, "c1", "k", 10); return err }},
		{"processing", ok(200, markJSON), func(ctx context.Context, c *Client) error { _, err := c.Processing(ctx, "c1", "m1"); return err }},
		{"processed", ok(200, markJSON), func(ctx context.Context, c *Client) error { _, err := c.Processed(ctx, "c1", "m1"); return err }},
		{"failed", ok(200, markJSON), func(ctx context.Context, c *Client) error { _, err := c.Failed(ctx, "c1", "m1", "why"); return err }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				busy := answer{status: 503, body: "<html>busy</html>"}
				s := newStub(sequence(busy, busy, busy, tt.success))
				require.NoError(t, tt.call(t.Context(), s.client(retryOpts)))
				hits := s.requests()
				require.Len(t, hits, 4)
				assert.Equal(t, jitterWaits(retryOpts, hits[0], 3), s.gaps())
				for _, h := range hits[1:] {
					assert.Equal(t, hits[0].Method, h.Method)
					assert.Equal(t, hits[0].Path, h.Path)
					assert.Equal(t, hits[0].Query, h.Query)
					assert.Equal(t, hits[0].Body, h.Body, "the body is rewound for each try")
					assert.Equal(t, testKey, h.Header.Get("X-API-Key"))
				}
			})
		})
	}
}

func TestAttemptsAreCappedAndTheLastErrorReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStub(func(n int, _ *http.Request) answer {
			return answer{status: 502, header: map[string]string{"X-Request-ID": fmt.Sprint("req-", n+1)},
				body: fmt.Sprintf("bad gateway, try %d", n+1)}
		})
		_, err := s.client(retryOpts).Processed(t.Context(), "c1", "m1")
		var apiErr *APIError
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, &APIError{Endpoint: EndpointProcessed, Status: 502, RequestID: "req-4", Body: "bad gateway, try 4"}, apiErr)
		assert.Len(t, s.requests(), retryOpts.MaxAttempts)
		assert.Equal(t, jitterWaits(retryOpts, s.requests()[0], 3), s.gaps())
	})
}

func TestTransportErrorsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStub(sequence(ok(200, `{"data":`+messageJSON+`}`)))
		rt := &flaky{next: &memnet.Transport{Handler: s}, fails: 2}
		c := NewClient(testBase, testKey, NewRetryDoer(&http.Client{Transport: rt}, retryOpts))
		start := time.Now()
		m, err := c.Next(t.Context(), "c1")
		require.NoError(t, err)
		assert.Equal(t, "m1", m.ID)
		assert.EqualValues(t, 3, rt.tries.Load())
		w := jitterWaits(retryOpts, nextCall, 2)
		assert.Equal(t, w[0]+w[1], time.Since(start))
	})
}

func TestTransportErrorsExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &flaky{fails: 1 << 30}
		c := NewClient(testBase, testKey, NewRetryDoer(&http.Client{Transport: rt}, retryOpts))
		_, err := c.Next(t.Context(), "c1")
		assert.ErrorIs(t, err, errConnReset)
		assert.Contains(t, err.Error(), EndpointNext)
		assert.EqualValues(t, retryOpts.MaxAttempts, rt.tries.Load())
	})
}

func TestFinalStatusesAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 422, 501} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStub(sequence(answer{status: status, header: map[string]string{"Retry-After": "1"}}))
				_, err := s.client(retryOpts).Processing(t.Context(), "c1", "m1")
				var apiErr *APIError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, status, apiErr.Status)
				assert.Len(t, s.requests(), 1)
			})
		})
	}
}

func TestPostIsNeverRetried(t *testing.T) {
	for _, status := range []int{429, 500, 503} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStub(sequence(answer{status: status}, ok(201, `{"data":{"id":"p1"}}`)))
				_, err := s.client(retryOpts).Post(t.Context(), "c1", "hi", []Mention{{ID: "u1"}})
				var apiErr *APIError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, status, apiErr.Status)
				assert.Equal(t, EndpointPost, apiErr.Endpoint)
				assert.Len(t, s.requests(), 1)
			})
		})
	}
	t.Run("transport error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStub(sequence(ok(201, `{"data":{"id":"p1"}}`)))
			rt := &flaky{next: &memnet.Transport{Handler: s}, fails: 1}
			c := NewClient(testBase, testKey, NewRetryDoer(&http.Client{Transport: rt}, retryOpts))
			_, err := c.Post(t.Context(), "c1", "hi", nil)
			assert.ErrorIs(t, err, errConnReset)
			assert.EqualValues(t, 1, rt.tries.Load())
			assert.Empty(t, s.requests())
		})
	})
}

func TestMaxAttemptsOneSendsOnce(t *testing.T) {
	for _, attempts := range []int{1, 0, -2} {
		s := newStub(sequence(answer{status: 503}, ok(200, agentJSON)))
		o := retryOpts
		o.MaxAttempts = attempts
		_, err := s.client(o).Me(t.Context())
		var apiErr *APIError
		require.ErrorAs(t, err, &apiErr, "MaxAttempts %d", attempts)
		assert.Len(t, s.requests(), 1, "MaxAttempts %d", attempts)
	}
}

func TestCancelMidBackoffReturnsPromptlyWithTheCause(t *testing.T) {
	errShutdown := errors.New("shutting down")
	tests := []struct {
		name  string
		reply answer
		opts  RetryOptions
	}{
		{"waiting out a Retry-After", answer{status: 429, header: map[string]string{"Retry-After": "3600"}},
			RetryOptions{MaxAttempts: 5, MaxRetryAfter: time.Hour, Seed: 1}},
		{"waiting out a jittered backoff", answer{status: 503},
			RetryOptions{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour, Seed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if tt.reply.header == nil {
					require.Greater(t, jitterWaits(tt.opts, nextCall, 1)[0], time.Second, "the draw must outlast the cancel")
				}
				s := newStub(sequence(tt.reply))
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(time.Second, func() { cancel(errShutdown) })
				start := time.Now()
				_, err := s.client(tt.opts).Next(ctx, "c1")
				assert.ErrorIs(t, err, errShutdown)
				assert.Equal(t, time.Second, time.Since(start))
				assert.Len(t, s.requests(), 1)
			})
		})
	}
}

func TestBackoffCeilings(t *testing.T) {
	base, maxDelay := 100*time.Millisecond, 2*time.Second
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for n, w := range want {
		assert.Equal(t, w*time.Millisecond, backoffCeiling(base, maxDelay, n), "n=%d", n)
	}
	assert.Equal(t, maxDelay, backoffCeiling(base, maxDelay, 1000), "no overflow at large n")
	assert.Equal(t, time.Duration(1<<62), backoffCeiling(1, 1<<62, 62))
	assert.Equal(t, time.Duration(0), backoffCeiling(0, maxDelay, 3))
	assert.Equal(t, time.Duration(0), backoffCeiling(base, 0, 3))
	assert.Equal(t, base, backoffCeiling(base, maxDelay, -1))
}

func TestFullJitterBounds(t *testing.T) {
	for _, ceiling := range []time.Duration{1, 10 * time.Millisecond, time.Second, time.Hour, 1 << 62} {
		for seed := uint64(1); seed <= 20; seed++ {
			j := newJitter(seed)
			lo, hi := ceiling, time.Duration(0)
			for range 500 {
				w := j.upTo(ceiling)
				require.GreaterOrEqual(t, w, time.Duration(0))
				require.LessOrEqual(t, w, ceiling)
				lo, hi = min(lo, w), max(hi, w)
			}
			// Full jitter spans the whole range, not a band near the top.
			assert.LessOrEqual(t, lo, ceiling/10, "seed %d ceiling %v", seed, ceiling)
			assert.GreaterOrEqual(t, hi, ceiling-ceiling/10, "seed %d ceiling %v", seed, ceiling)
		}
	}
	assert.Equal(t, time.Duration(0), newJitter(1).upTo(0))
	assert.Equal(t, time.Duration(0), newJitter(1).upTo(-time.Second))
}

func TestSameSeedSameWaits(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		var gaps []time.Duration
		synctest.Test(t, func(t *testing.T) {
			s := newStub(sequence(answer{status: 503}, answer{status: 503}, answer{status: 503}, ok(200, agentJSON)))
			o := retryOpts
			o.Seed = seed
			_, err := s.client(o).Me(t.Context())
			require.NoError(t, err)
			gaps = s.gaps()
		})
		return gaps
	}
	first := run(7)
	require.Len(t, first, 3)
	assert.Equal(t, first, run(7))
	assert.NotEqual(t, first, run(8))
}

// Requests of many rooms retry at once and share the jitter source; the
// race detector checks the sharing.
func TestConcurrentRetriesShareTheJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		s := newStub(func(_ int, r *http.Request) answer {
			mu.Lock()
			defer mu.Unlock()
			seen[r.URL.Path]++
			if seen[r.URL.Path] <= 2 {
				return answer{status: 503}
			}
			return ok(200, `{"data":`+messageJSON+`}`)
		})
		c := s.client(retryOpts)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				_, err := c.Next(t.Context(), fmt.Sprint("c", i))
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Len(t, s.requests(), 24)
	})
}

func TestEachRetryIsLoggedAtDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		o := retryOpts
		o.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := newStub(sequence(answer{status: 503}, answer{status: 429, header: map[string]string{"Retry-After": "2"}}, ok(200, agentJSON)))
		rt := &flaky{next: &memnet.Transport{Handler: s}, fails: 1}
		c := NewClient(testBase, testKey, NewRetryDoer(&http.Client{Transport: rt}, o))
		_, err := c.Me(t.Context())
		require.NoError(t, err)

		type record struct {
			Level    string
			Msg      string
			Endpoint string
			Attempt  int
			Wait     time.Duration
			Cause    string
		}
		var got []record
		for line := range strings.Lines(buf.String()) {
			var r record
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			got = append(got, r)
		}
		w := jitterWaits(o, meCall, 2)
		require.Len(t, got, 3)
		for i, r := range got {
			assert.Equal(t, "DEBUG", r.Level)
			assert.Equal(t, "band: retrying request", r.Msg)
			assert.Equal(t, EndpointMe, r.Endpoint)
			assert.Equal(t, i+1, r.Attempt)
		}
		assert.Contains(t, got[0].Cause, errConnReset.Error())
		assert.Equal(t, w[0], got[0].Wait)
		assert.Equal(t, "503 Service Unavailable", got[1].Cause)
		assert.Equal(t, w[1], got[1].Wait)
		assert.Equal(t, "429 Too Many Requests", got[2].Cause)
		assert.Equal(t, 2*time.Second, got[2].Wait)
	})
}

func TestNothingIsLoggedAboveDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		o := retryOpts
		o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s := newStub(sequence(answer{status: 503}))
		_, err := s.client(o).Me(t.Context())
		require.Error(t, err)
		assert.Empty(t, buf.String())
	})
}

// The Doer alone, without the Client above it, keeps the cause too: the
// shell may use it for calls the Client does not wrap.
func TestDoerErrorCarriesTheCause(t *testing.T) {
	errInterrupt := errors.New("interrupted")
	synctest.Test(t, func(t *testing.T) {
		s := newStub(sequence(answer{status: 503}))
		d := NewRetryDoer(memnet.Client(s), RetryOptions{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, Seed: 1})
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(errInterrupt) })
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, testBase+"/agent/me", nil)
		require.NoError(t, err)
		resp, err := d.Do(req, "", true)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, errInterrupt)
		assert.ErrorIs(t, err, context.Canceled)
	})
}
