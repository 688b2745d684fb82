package phoenix_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/phoenix"
)

// canaryKey is recognisable anywhere; canaryCore is the part of it no
// text may hold, even cut short.
const (
	canaryKey  = "band_a_L3AKC4NARY0123456789abcdef"
	canaryCore = "L3AKC4"
)

func assertNoKey(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		assert.NotContains(t, text, canaryCore, "%s: %s", what, text)
	}
}

func errTexts(err error) []string {
	if err == nil {
		return nil
	}
	texts := []string{err.Error(), fmt.Sprintf("%+v", err)}
	var ue *phoenix.UpgradeError
	if errors.As(err, &ue) {
		texts = append(texts, fmt.Sprintf("%+v", *ue))
	}
	return texts
}

// canaryConfig is rec's config with the canary key, also put in the URL
// as an older client would: it must come out of it.
func canaryConfig(rec *recorder, band *fakeBand) phoenix.Config {
	cfg := rec.config(band)
	cfg.APIKey = canaryKey
	cfg.URL += "?api_key=" + canaryKey
	return cfg
}

// Everything a server can answer on the socket, quoting the key back,
// stays out of errors, callbacks and logs; the key itself goes only in
// the x-api-key header.
func TestNoSocketAnswerGetsTheKeyIntoTextOrCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		echo := `{"error":{"code":"` + canaryKey + `","message":"key ` + canaryKey + ` over quota"}}`
		band.refuse(http.StatusServiceUnavailable, nil, echo)
		band.refuse(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}},
			cutAtOneKiB)
		band.refuseJoin[room1] = json.RawMessage(`{"reason":"` + canaryKey + ` may not join"}`)
		rec := newRecorder()
		c := phoenix.New(canaryConfig(rec, band))
		c.Join(control, rec.handler(control))
		c.Join(room1, rec.handler(room1))
		run := start(t, c)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.True(t, c.Connected(), "connected after the two refusals")

		conn := band.conn(0)
		conn.writeRaw(t.Context(), websocket.MessageText, []byte(`[{"k":"`+canaryKey+`"},null,"t","e",{}]`))
		conn.writeRaw(t.Context(), websocket.MessageText, []byte(`["`+canaryKey))
		synctest.Wait()
		conn.drop()
		synctest.Wait()
		run.stop(t)

		ups := band.upgradeLog()
		require.Len(t, ups, 3)
		for _, up := range ups {
			assert.Equal(t, canaryKey, up.header.Get("X-Api-Key"))
			assert.NotContains(t, up.query, "api_key", "the key is never in the URL")
		}
		for _, je := range rec.joinErrs() {
			assertNoKey(t, "OnJoinError", je.response)
		}
		require.NotEmpty(t, rec.joinErrs())
		for _, err := range rec.disconnectErrs() {
			assertNoKey(t, "OnDisconnected", errTexts(err)...)
		}
		logs := rec.logs.String()
		assert.Contains(t, logs, "connect failed")
		assert.Contains(t, logs, "join refused")
		assert.Contains(t, logs, "bad frame")
		assertNoKey(t, "logs", logs)
	})
}

// cutAtOneKiB holds the key where the dialer cuts a refusal's body.
var cutAtOneKiB = strings.Repeat("x", 1024-14) + canaryKey

// A fatal refusal quoting the key, whole or cut short, ends Run with an
// error that does not.
func TestAFatalRefusalQuotingTheKeyIsScrubbed(t *testing.T) {
	for name, body := range map[string]string{
		"envelope": `{"error":{"code":"forbidden ` + canaryKey + `","message":"` + canaryKey + `"}}`,
		"cut":      cutAtOneKiB,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				band := newFakeBand(t)
				band.refuse(http.StatusForbidden, nil, body)
				rec := newRecorder()
				err := phoenix.New(canaryConfig(rec, band)).Run(t.Context())
				var ue *phoenix.UpgradeError
				require.ErrorAs(t, err, &ue)
				assert.Equal(t, http.StatusForbidden, ue.Status)
				assert.NotEmpty(t, ue.Body)
				assertNoKey(t, "Run", errTexts(err)...)
				assertNoKey(t, "logs", rec.logs.String())
			})
		})
	}
}

// realConfig dials over the network with short waits, logging to rec.
func realConfig(rec *recorder, url string, hc *http.Client) phoenix.Config {
	return phoenix.Config{
		URL:           url + "?api_key=" + canaryKey,
		APIKey:        canaryKey,
		AgentID:       "agent-1",
		HTTPClient:    hc,
		Logger:        slog.New(slog.NewTextHandler(&rec.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ReconnectBase: time.Millisecond,
		ReconnectMax:  5 * time.Millisecond,
	}
}

// runUntilLogged runs c until its log holds want n times, then stops it.
func runUntilLogged(t *testing.T, c *phoenix.Client, rec *recorder, want string, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return strings.Count(rec.logs.String(), want) >= n },
		20*time.Second, 5*time.Millisecond, "never logged %q %d times:\n%s", want, n, rec.logs.String())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// Dial failures over a real network: nothing listening, a certificate
// not trusted (both retried), a redirect to another origin (which ends
// Run). None shows the key, and the redirect's target never receives it.
func TestRealDialFailuresDoNotShowTheKey(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "ws://" + l.Addr().String() + "/api/v1/socket/websocket"
	require.NoError(t, l.Close())

	tlsServer := quietTLSServer()
	defer tlsServer.Close()
	untrusted := "wss://" + strings.TrimPrefix(tlsServer.URL, "https://") + "/api/v1/socket/websocket"

	var keysElsewhere atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			keysElsewhere.Add(1)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer elsewhere.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	defer home.Close()
	redirecting := "ws://" + strings.TrimPrefix(home.URL, "http://") + "/api/v1/socket/websocket"

	for name, tc := range map[string]struct{ url, want string }{
		"connection refused": {closed, "connection refused"},
		"untrusted TLS":      {untrusted, "certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder()
			c := phoenix.New(realConfig(rec, tc.url, &http.Client{}))
			runUntilLogged(t, c, rec, tc.want, 3)
			assertNoKey(t, "logs", rec.logs.String())
		})
	}
	t.Run("redirect elsewhere", func(t *testing.T) {
		// No retry can change it: Run ends at once with the refusal.
		rec := newRecorder()
		err := phoenix.New(realConfig(rec, redirecting, &http.Client{})).Run(t.Context())
		require.ErrorIs(t, err, keyguard.ErrCrossOriginRedirect)
		assertNoKey(t, "error", err.Error())
		assertNoKey(t, "logs", rec.logs.String())
	})
	assert.Zero(t, keysElsewhere.Load(), "the redirect's target never got the key")
}

// Printing a Client or its Config after New shows no key.
func TestPrintingAClientShowsNoKey(t *testing.T) {
	c := phoenix.New(phoenix.Config{URL: "wss://h/socket", APIKey: canaryKey})
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		assertNoKey(t, format, fmt.Sprintf(format, c))
	}
}

// quietTLSServer is a TLS server whose certificate no client trusts. The
// handshake errors it sees are the point; they are not logged to stderr.
func quietTLSServer() *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	return srv
}
