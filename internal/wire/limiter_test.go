package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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

// bucketServer answers like Band's load balancer: a token bucket of rate
// tokens per second (burst of one second's worth); an empty bucket answers
// 429, with Retry-After when retryAfter is set. Each answer takes latency.
type bucketServer struct {
	rate       float64
	retryAfter string
	latency    time.Duration

	mu              sync.Mutex
	tokens          float64
	last            time.Time
	inFlight, peak  int
	served, refused int
	starts          []time.Time
}

func (b *bucketServer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	now := time.Now()
	if b.last.IsZero() {
		b.tokens, b.last = b.rate, now
	}
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.starts = append(b.starts, now)
	b.inFlight++
	b.peak = max(b.peak, b.inFlight)
	status := http.StatusOK
	if b.rate > 0 && b.tokens < 1 {
		status = http.StatusTooManyRequests
		b.refused++
	} else {
		b.tokens--
		b.served++
	}
	b.mu.Unlock()
	time.Sleep(b.latency)
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}
	if status == http.StatusTooManyRequests && b.retryAfter != "" {
		resp.Header.Set("Retry-After", b.retryAfter)
	}
	return resp, nil
}

// hammer sends requests from clients goroutines through the limiter, each
// one after another, for d.
func hammer(t *testing.T, tr http.RoundTripper, clients int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://band.test/x", nil)
				if err != nil {
					return
				}
				if resp, err := tr.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
}

func TestLimiterCapsRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &bucketServer{latency: 10 * time.Millisecond}
		lim := NewLimiter(8, time.Second)
		hammer(t, &LimitedTransport{Next: srv, Limiter: lim}, 50, time.Second)
		assert.Equal(t, 8, srv.peak)
		assert.True(t, math.IsInf(lim.Rate(), 1), "never throttled: no pacing")
		assert.Zero(t, srv.refused)
	})
}

// Against a server that allows 200 requests a second, fifty clients that
// would each send as fast as they can hold near that rate, with under
// 2% of their requests refused.
func TestLimiterHoldsUnderAServersRateLimit(t *testing.T) {
	for _, retryAfter := range []string{"", "1"} {
		t.Run("Retry-After="+retryAfter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &bucketServer{rate: 200, retryAfter: retryAfter, latency: 2 * time.Millisecond}
				lim := NewLimiter(64, 5*time.Second)
				hammer(t, &LimitedTransport{Next: srv, Limiter: lim}, 50, time.Minute)
				total := srv.served + srv.refused
				share := float64(srv.refused) / float64(total)
				t.Logf("served %d, refused %d (%.2f%%), %.0f served/s, final pace %.0f/s",
					srv.served, srv.refused, 100*share, float64(srv.served)/60, lim.Rate())
				assert.Less(t, share, 0.02, "under 2%% of requests throttled")
				assert.Greater(t, float64(srv.served)/60, 120.0, "most of what the server allows is used")
				assert.Equal(t, srv.refused, lim.Throttled())
			})
		})
	}
}

// A Retry-After holds every start until it has passed, capped.
func TestLimiterPausesForRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(4, 3*time.Second)
		start, err := lim.acquire(context.Background(), "k")
		require.NoError(t, err)
		lim.release(start, http.StatusTooManyRequests, time.Hour, true)
		begin := time.Now()
		_, err = lim.acquire(context.Background(), "k")
		require.NoError(t, err)
		assert.InDelta(t, float64(3*time.Second), float64(time.Since(begin)), float64(time.Microsecond), "paused for the capped Retry-After")
	})
}

// 429s of requests that started before the last decrease are the same
// congestion: the pace is halved once for them, not once each.
func TestLimiterHalvesOncePerCongestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(100, time.Second)
		var starts []time.Time
		for range 40 {
			s, err := lim.acquire(context.Background(), "k")
			require.NoError(t, err)
			starts = append(starts, s)
			time.Sleep(5 * time.Millisecond) // 200 starts a second
		}
		for _, s := range starts {
			lim.release(s, http.StatusTooManyRequests, 0, false)
		}
		assert.InDelta(t, 100, lim.Rate(), 10, "half the start rate, once")
		assert.Equal(t, 40, lim.Throttled())

		// Then unthrottled requests raise it again, a little at a time.
		before := lim.Rate()
		for range 100 {
			s, err := lim.acquire(context.Background(), "k")
			require.NoError(t, err)
			lim.release(s, http.StatusOK, 0, false)
		}
		assert.InDelta(t, before+100*increase/before, lim.Rate(), 1)
	})
}

// The pace is lifted once Band has gone liftAfter without a 429, and
// OnPace hears the drop, every further cut and the lift, in that order.
func TestLimiterLiftsThePaceAfterAQuietSpellAndSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(4, time.Second)
		var heard []string
		lim.OnPace(func(p Pace) { heard = append(heard, fmt.Sprint(p.Paced, " ", p.Rate > 0, " ", p.Cuts, " ", p.Refused)) })
		send := func(status int) {
			s, err := lim.acquire(context.Background(), "k")
			require.NoError(t, err)
			lim.release(s, status, 0, false)
		}
		send(http.StatusTooManyRequests)
		time.Sleep(time.Second) // a new congestion: cut again
		send(http.StatusTooManyRequests)
		assert.False(t, math.IsInf(lim.Rate(), 1), "paced")
		for end := time.Now().Add(liftAfter - time.Second); time.Now().Before(end); {
			send(http.StatusOK) // accepted, but not yet for long enough
		}
		assert.False(t, math.IsInf(lim.Rate(), 1), "still paced a second short of liftAfter")
		time.Sleep(time.Second)
		send(http.StatusOK)
		assert.True(t, math.IsInf(lim.Rate(), 1), "lifted")
		assert.Equal(t, []string{"true true 1 1", "true true 2 2", "false false 2 2"}, heard)
	})
}

func TestLimiterWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(1, time.Second)
		_, err := lim.acquire(context.Background(), "k")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = lim.acquire(ctx, "k")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// Requests waiting for a start get it smallest key first, whatever order
// their goroutines ran in: a run in virtual time replays exactly.
func TestLimiterGrantsTheSmallestKeyFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(1, time.Second)
		first, err := lim.acquire(context.Background(), "GET /hold")
		require.NoError(t, err)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for _, k := range []string{"POST /c", "GET /b", "GET /a", "POST /a"} {
			wg.Go(func() {
				s, err := lim.acquire(context.Background(), k)
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, k)
				mu.Unlock()
				lim.release(s, http.StatusOK, 0, false)
			})
		}
		synctest.Wait()
		lim.release(first, http.StatusOK, 0, false)
		wg.Wait()
		assert.Equal(t, []string{"GET /a", "GET /b", "POST /a", "POST /c"}, order)
	})
}

// A request whose start check refuses when the limiter lets it start is
// never sent, and fails with a *NotSentError carrying the reason.
func TestAStartCheckWithdrawsARequestBeforeItIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &bucketServer{}
		lim := NewLimiter(4, time.Second)
		tr := &LimitedTransport{Next: srv, Limiter: lim}
		withdrawn := errors.New("interrupted while waiting")
		ctx := WithStartCheck(context.Background(), func() error { return withdrawn })
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://band.test/x", strings.NewReader("body"))
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		var notSent *NotSentError
		require.ErrorAs(t, err, &notSent)
		assert.ErrorIs(t, err, withdrawn)
		assert.Zero(t, srv.served+srv.refused, "nothing reached the server")

		// The start it was given is free again.
		for range 4 {
			_, err := lim.acquire(context.Background(), "k")
			require.NoError(t, err)
		}
	})
}

// A retried request asks its start check again before every try, and a
// try the check withholds ends the retries: the request fails with a
// *NotSentError, and nothing more reaches the server.
func TestARetryIsWithheldByItsStartCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries, served int
		srv := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served++
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		lim := NewLimiter(4, time.Second)
		hc := &http.Client{Transport: &LimitedTransport{Next: memnet.Client(srv).Transport, Limiter: lim}}
		doer := NewRetryDoer(hc, RetryOptions{MaxAttempts: 5, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
		stopped := errors.New("stopped between two tries")
		ctx := WithStartCheck(context.Background(), func() error {
			if tries++; tries > 1 {
				return stopped
			}
			return nil
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://band.test/x", strings.NewReader("body"))
		require.NoError(t, err)
		_, err = doer.Do(req, "", true)
		var notSent *NotSentError
		require.ErrorAs(t, err, &notSent)
		assert.ErrorIs(t, err, stopped)
		assert.Equal(t, 1, served, "the retry was not sent")
		assert.Equal(t, 2, tries, "asked before the first try and before the retry, then no more")
	})
}

// A 429 answered while OnPace is still reporting the first drop counts in
// the episode: the count is taken under the limiter's lock, not read back
// by the listener afterwards (which two rooms throttled in one instant
// once shifted).
func TestLimiterCountsA429ThatRacesThePaceReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := NewLimiter(4, time.Second)
		first, err := lim.acquire(context.Background(), "a")
		require.NoError(t, err)
		second, err := lim.acquire(context.Background(), "b")
		require.NoError(t, err)
		var heard []Pace
		lim.OnPace(func(p Pace) {
			heard = append(heard, p)
			if p.First() {
				lim.release(second, http.StatusTooManyRequests, 0, false)
			}
		})
		lim.release(first, http.StatusTooManyRequests, 0, false)
		time.Sleep(liftAfter)
		s, err := lim.acquire(context.Background(), "c")
		require.NoError(t, err)
		lim.release(s, http.StatusOK, 0, false)
		require.GreaterOrEqual(t, len(heard), 2)
		assert.True(t, heard[0].First())
		lift := heard[len(heard)-1]
		assert.False(t, lift.Paced)
		assert.Equal(t, 2, lift.Refused, "both 429s of the episode")
		assert.Equal(t, heard[0].Since, lift.Since, "one episode")
	})
}
