package phoenix_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/memnet"
	"github.com/band-once/bandonce/internal/phoenix"
)

func TestFatalUpgradeRefusalsEndRunAfterOneAttempt(t *testing.T) {
	cases := []struct {
		status int
		body   string
		code   string
	}{
		{http.StatusUnauthorized, ``, ""},
		{http.StatusForbidden, ``, ""},
		{http.StatusConflict, `{"error":{"code":"connection_conflict","message":"another connection is active","request_id":"r"}}`, "connection_conflict"},
		{http.StatusBadRequest, `{"error":{"code":"invalid_on_conflict","message":"bad"}}`, "invalid_on_conflict"},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				band := newFakeBand(t)
				band.refuse(tc.status, http.Header{"Retry-After": {"5"}}, tc.body)
				rec := newRecorder()
				c := phoenix.New(rec.config(band))
				c.Join(control, rec.handler(control))
				began := time.Now()
				run := start(t, c)
				synctest.Wait()
				var err error
				select {
				case err = <-run.done:
				default:
					run.stop(t)
					t.Fatal("Run kept going after a fatal refusal")
				}

				var ue *phoenix.UpgradeError
				require.ErrorAs(t, err, &ue)
				assert.Equal(t, tc.status, ue.Status)
				assert.Equal(t, tc.code, ue.Code)
				assert.Equal(t, tc.body, ue.Body)
				assert.True(t, ue.Fatal())
				assert.Len(t, band.upgradeLog(), 1, "a fatal refusal is never retried")
				assert.Equal(t, began, time.Now(), "no waiting before giving up")
				assert.Zero(t, rec.connectedCount())
				assert.Empty(t, rec.disconnectErrs())
				assert.False(t, c.Connected())
			})
		})
	}
}

func TestTooManyRequestsWaitsExactlyTheCappedHint(t *testing.T) {
	cases := []struct {
		name     string
		header   http.Header
		body     string
		maxRetry time.Duration
		want     time.Duration
	}{
		{"body", nil, `{"error":{"code":"too_many_requests","retry_after":7}}`, 0, 7 * time.Second},
		{"body fractional", nil, `{"error":{"code":"too_many_requests","retry_after":2.5}}`, 0, 2500 * time.Millisecond},
		{"body string", nil, `{"error":{"code":"too_many_requests","retry_after":"4"}}`, 0, 4 * time.Second},
		{"body capped", nil, `{"error":{"code":"too_many_requests","retry_after":120}}`, 45 * time.Second, 45 * time.Second},
		{"header", http.Header{"Retry-After": {"9"}}, ``, 0, 9 * time.Second},
		{"header capped by default", http.Header{"Retry-After": {"600"}}, ``, 0, 60 * time.Second},
		{"body wins over header", http.Header{"Retry-After": {"50"}}, `{"error":{"code":"too_many_requests","retry_after":3}}`, 0, 3 * time.Second},
		{"header when body has none", http.Header{"Retry-After": {"11"}}, `{"error":{"code":"too_many_requests"}}`, 0, 11 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				band := newFakeBand(t)
				band.refuse(http.StatusTooManyRequests, tc.header, tc.body)
				rec := newRecorder()
				cfg := rec.config(band)
				cfg.MaxRetryAfter = tc.maxRetry
				c := phoenix.New(cfg)
				c.Join(control, rec.handler(control))
				run := start(t, c)

				time.Sleep(tc.want - time.Nanosecond)
				synctest.Wait()
				assert.Len(t, band.upgradeLog(), 1, "not before the hint")
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				ups := band.upgradeLog()
				require.Len(t, ups, 2)
				assert.Equal(t, tc.want, ups[1].at.Sub(ups[0].at))
				assert.True(t, c.Connected())
				assert.Equal(t, 1, rec.connectedCount())
				run.stop(t)
			})
		})
	}
}

func TestRetryableRefusalsBackOffWithJitterThenConnect(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
	}{
		{"503 tracking_failed", http.StatusServiceUnavailable, `{"error":{"code":"tracking_failed"}}`},
		{"429 without a hint", http.StatusTooManyRequests, ``},
		{"500 empty", http.StatusInternalServerError, ``},
		{"502 not json", http.StatusBadGateway, `<html>bad gateway</html>`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				band := newFakeBand(t)
				for range 4 {
					band.refuse(tc.status, nil, tc.body)
				}
				rec := newRecorder()
				c := phoenix.New(rec.config(band))
				c.Join(control, rec.handler(control))
				run := start(t, c)
				for len(band.upgradeLog()) < 5 {
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
				}
				ups := band.upgradeLog()
				for i := 1; i < len(ups); i++ {
					window := time.Second << (i - 1)
					assert.Less(t, ups[i].at.Sub(ups[i-1].at), window, "retry %d waits within its doubling window", i)
				}
				assert.True(t, c.Connected())
				assert.Equal(t, 1, rec.connectedCount())
				assert.Equal(t, 1, band.connCount())
				run.stop(t)
			})
		})
	}
}

// flakyTransport fails the first n round trips as a network would.
type flakyTransport struct {
	mu    sync.Mutex
	fails int
	next  http.RoundTripper
}

var errNetwork = errors.New("connection refused")

func (f *flakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return nil, errNetwork
	}
	return f.next.RoundTrip(req)
}

func TestTransportErrorsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.HTTPClient = &http.Client{Transport: &flakyTransport{fails: 3, next: &memnet.Transport{Handler: band}}}
		c := phoenix.New(cfg)
		c.Join(control, rec.handler(control))
		run := start(t, c)
		time.Sleep(10 * time.Second) // three backoffs of at most 1+2+4 seconds
		synctest.Wait()
		assert.True(t, c.Connected())
		assert.Len(t, band.upgradeLog(), 1, "only the fourth attempt reached the server")
		assert.Contains(t, rec.logs.String(), "connection refused")
		run.stop(t)
	})
}

func TestUpgradeThatNeverAnswersIsAbandonedAfterAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		attempts := 0
		release := make(chan struct{}) // the upgrade's server side outlives the dial, as a real one does
		hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			attempts++
			mu.Unlock()
			<-release
		})
		rec := newRecorder()
		cfg := rec.config(newFakeBand(t))
		cfg.HTTPClient = memnet.Client(hang)
		cfg.HeartbeatInterval = 10 * time.Second
		c := phoenix.New(cfg)
		run := start(t, c)
		time.Sleep(10*time.Second + time.Second) // one timeout plus the first backoff window
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, 2, attempts)
		mu.Unlock()
		assert.False(t, c.Connected())
		run.stop(t)
		close(release)
	})
}
