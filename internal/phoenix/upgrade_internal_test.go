package phoenix

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseUpgradeErrorReadsBandsEnvelopeDefensively(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header string
		body   string
		code   string
		after  time.Duration
	}{
		{"empty", 403, "", ``, "", 0},
		{"envelope", 429, "", `{"error":{"code":"too_many_requests","retry_after":12}}`, "too_many_requests", 12 * time.Second},
		{"header only", 429, "8", ``, "", 8 * time.Second},
		{"negative hint ignored", 429, "", `{"error":{"code":"x","retry_after":-5}}`, "x", 0},
		{"negative hint falls back to header", 429, "6", `{"error":{"retry_after":-5}}`, "", 6 * time.Second},
		{"bool hint ignored", 429, "", `{"error":{"retry_after":true}}`, "", 0},
		{"huge hint clamped", 429, "", `{"error":{"retry_after":1e300}}`, "", maxHintSeconds * time.Second},
		{"not json", 502, "", `<html>`, "", 0},
		{"wrong shape", 503, "", `{"error":"tracking_failed"}`, "", 0},
		{"bad header", 429, "soon", ``, "", 0},
		{"nan header", 429, "NaN", ``, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			e := parseUpgradeError(tc.status, h, []byte(tc.body))
			assert.Equal(t, tc.status, e.Status)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, tc.after, e.RetryAfter)
			assert.Equal(t, tc.body, e.Body)
		})
	}
}

func TestRetryAfterHeaderAcceptsAnHTTPDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		when := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
		assert.Equal(t, 90*time.Second, parseRetryAfterHeader(when))
		past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
		assert.Zero(t, parseRetryAfterHeader(past))
		assert.Equal(t, maxHintSeconds*time.Second, parseRetryAfterHeader("Fri, 31 Dec 9999 23:59:59 GMT"))
	})
}

func TestOnlyBadRequestAuthAndConflictAreFatal(t *testing.T) {
	fatal := map[int]bool{400: true, 401: true, 403: true, 409: true}
	for _, status := range []int{400, 401, 403, 404, 409, 429, 500, 502, 503} {
		assert.Equal(t, fatal[status], (&UpgradeError{Status: status}).Fatal(), "%d", status)
	}
	assert.Equal(t, `phoenix: upgrade refused: 429 too_many_requests (retry after 3s)`,
		(&UpgradeError{Status: 429, Code: "too_many_requests", RetryAfter: 3 * time.Second}).Error())
	assert.Zero(t, (&UpgradeError{Status: 503, RetryAfter: time.Second}).retryHint(), "only a 429's hint is honoured")
}

func TestSocketURLAddsBandsQueryAndNoKey(t *testing.T) {
	got, err := socketURL("wss://app.band.ai/api/v1/socket/websocket?on_conflict=reject&api_key=band_a_inurl", "a1")
	require.NoError(t, err)
	assert.Equal(t, "wss://app.band.ai/api/v1/socket/websocket?agent_id=a1&on_conflict=reject&vsn=2.0.0", got)
}

func TestAKeyInTheURLIsAdoptedOnlyWhenNoneIsGiven(t *testing.T) {
	const u = "wss://app.band.ai/api/v1/socket/websocket?api_key=band_a_inurl0000"
	assert.Equal(t, "band_a_inurl0000", New(Config{URL: u}).key.Value())
	assert.Equal(t, "band_a_given00000", New(Config{URL: u, APIKey: "band_a_given00000"}).key.Value())
	assert.Empty(t, New(Config{URL: u, APIKey: "band_a_given00000"}).cfg.APIKey, "the key is kept only where fmt cannot print it")
}

func TestJitterStaysInItsWindowAndReplaysFromTheSeed(t *testing.T) {
	a := newJitter(time.Second, 10*time.Second, 7)
	b := newJitter(time.Second, 10*time.Second, 7)
	for attempt := range 40 {
		window := min(time.Second<<min(attempt, 20), 10*time.Second)
		d := a.delay(attempt)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, window, "attempt %d", attempt)
		assert.Equal(t, d, b.delay(attempt), "same seed, same waits")
	}
	huge := newJitter(time.Duration(1<<62), time.Duration(1<<63-1), 1)
	assert.GreaterOrEqual(t, huge.delay(5), time.Duration(0), "no overflow near the top of Duration")
}

// FuzzParseUpgradeError feeds arbitrary refusal bodies and Retry-After
// values: no panic, and a hint is never negative or beyond the clamp.
func FuzzParseUpgradeError(f *testing.F) {
	f.Add(429, "", []byte(`{"error":{"code":"too_many_requests","retry_after":5}}`))
	f.Add(409, "", []byte(`{"error":{"code":"connection_conflict"}}`))
	f.Add(429, "120", []byte(``))
	f.Add(429, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{}`))
	f.Add(503, "-1", []byte(`{"error":{"retry_after":"1e999"}}`))
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		e := parseUpgradeError(status, h, body)
		require.Equal(t, status, e.Status)
		require.Equal(t, string(body), e.Body)
		require.GreaterOrEqual(t, e.RetryAfter, time.Duration(0))
		require.LessOrEqual(t, e.RetryAfter, maxHintSeconds*time.Second)
		_ = e.Error()
		_ = e.Fatal()
	})
}
