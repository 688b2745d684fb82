package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// canaryKey is recognisable anywhere; its core, the characters after
// "band_a_", must not appear even cut short.
const canaryKey = "band_a_L3AKC4NARY0123456789abcdef"

// traces are the pieces of key no output may hold: the key, and a run of
// its secret part long enough not to turn up by chance in ids.
func traces(key string) []string {
	return []string{key, key[7:min(len(key), 17)]}
}

// observed is everything one shell run put out.
type observed struct {
	logs     safebuf.Buffer // text and JSON records, Debug and up
	mu       sync.Mutex
	outcomes []string // each Outcome, Err included, as %+v prints it
	runErr   error
}

func (o *observed) outcomeTexts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.outcomes...)
}

// texts is everything to search for the key.
func (o *observed) texts() []string {
	out := append([]string{o.logs.String()}, o.outcomeTexts()...)
	if o.runErr != nil {
		out = append(out, o.runErr.Error(), fmt.Sprintf("%+v", o.runErr), fmt.Sprintf("%#v", o.runErr))
		var apiErr *bandonce.APIError
		if errors.As(o.runErr, &apiErr) {
			out = append(out, fmt.Sprintf("%+v", *apiErr))
		}
	}
	return out
}

// observe wires cfg's logger and hooks to o, with short retry waits so
// failures repeat quickly.
func (o *observed) observe(cfg *bandonce.Config) {
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	cfg.Logger = slog.New(slog.NewMultiHandler(slog.NewTextHandler(&o.logs, opts), slog.NewJSONHandler(&o.logs, opts)))
	record := func(oc bandonce.Outcome) {
		o.mu.Lock()
		defer o.mu.Unlock()
		text := fmt.Sprintf("%+v", oc)
		if oc.Err != nil {
			text += " " + oc.Err.Error()
		}
		o.outcomes = append(o.outcomes, text)
	}
	cfg.Hooks.Outcome = record
	cfg.Hooks.DeadLetter = record
	cfg.Retry = bandonce.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Seed: 3}
}

// runUntil runs a shell with cfg until done(o) holds or Run returns by
// itself, then stops it. It fails the test if neither happens in 20 s.
func runUntil(t *testing.T, cfg bandonce.Config, done func(o *observed) bool) *observed {
	t.Helper()
	o := &observed{}
	o.observe(&cfg)
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- s.Run(ctx) }()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case o.runErr = <-ended:
			return o
		case <-tick.C:
			if done(o) {
				cancel()
				o.runErr = <-ended
				return o
			}
		case <-deadline:
			cancel()
			o.runErr = <-ended
			t.Fatalf("the awaited failure never happened; logs:\n%s", o.logs.String())
		}
	}
}

// logged waits for msg to be logged n times (by each of the two
// handlers).
func logged(msg string, n int) func(*observed) bool {
	return func(o *observed) bool { return strings.Count(o.logs.String(), msg) >= 2*n }
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// echoing serves answer to every request; answers quote the key back.
func echoing(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(srv.Close)
	return srv
}

// thief records whether any request reached it carrying the key.
type thief struct {
	srv  *httptest.Server
	keys atomic.Int32
}

func newThief(t *testing.T) *thief {
	th := &thief{}
	th.srv = echoing(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" || strings.Contains(r.URL.RawQuery, "api_key") {
			th.keys.Add(1)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	return th
}

// redirectingTo answers every request with a redirect to th whose
// Location quotes the key.
func redirectingTo(t *testing.T, th *thief, key string) *httptest.Server {
	return echoing(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, th.srv.URL+"/collect?k="+key, http.StatusTemporaryRedirect)
	})
}

func wsURL(srv *httptest.Server) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/socket/websocket"
}

// listeningBand is a fake Band on loopback, reached over TCP, with one
// agent in one room.
func listeningBand(t *testing.T) (band *fakeband.Band, agent fakeband.Agent, base string) {
	band = fakeband.New(fakeband.Options{Seed: 11})
	t.Cleanup(func() { _ = band.Close() })
	agent = band.AddAgent("echo")
	ada := band.AddHuman("ada")
	band.AddRoom("r", ada, agent.ID)
	base, err := band.Listen("127.0.0.1:0")
	require.NoError(t, err)
	return band, agent, base
}

// Every failure path that can carry a URL, a header or a server's echo
// of the key, driven for real over loopback: the key is in no log line
// (text or JSON, Debug up), no error Run returns and no outcome.
func TestNoFailurePathShowsTheKey(t *testing.T) {
	tlsServer := quietTLSServer()
	defer tlsServer.Close()
	html := func(status int) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", canaryKey)
			w.WriteHeader(status)
			fmt.Fprintf(w, "<html>request had X-Api-Key: %s</html>", r.Header.Get("X-Api-Key"))
		}
	}
	envelope := func(status int) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":"bad_key","message":"key %s is revoked","request_id":"%s"}}`, canaryKey, canaryKey)
		}
	}
	cutBody := func(w http.ResponseWriter, r *http.Request) { // the key straddles the excerpt's end
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(strings.Repeat("x", 512-12) + canaryKey))
	}

	rest := map[string]struct {
		base string
		done func(*observed) bool
	}{
		"REST dial failure":            {"http://" + closedAddr(t) + "/api/v1", logged("start-up call failed", 3)},
		"REST TLS failure":             {tlsServer.URL + "/api/v1", logged("start-up call failed", 3)},
		"REST redirect":                {"", logged("refused a redirect", 3)},
		"REST 5xx quoting the key":     {echoing(t, html(502)).URL + "/api/v1", logged("start-up call failed", 3)},
		"REST 5xx cutting the key":     {echoing(t, cutBody).URL + "/api/v1", logged("start-up call failed", 3)},
		"REST malformed answer":        {echoing(t, html(200)).URL + "/api/v1", logged("protocol error", 3)},
		"REST 401 quoting the key":     {echoing(t, envelope(401)).URL + "/api/v1", nil},
		"REST 422 envelope quoting it": {echoing(t, envelope(422)).URL + "/api/v1", logged("start-up call failed", 3)},
	}
	for name, tc := range rest {
		t.Run(name, func(t *testing.T) {
			th := newThief(t)
			base := tc.base
			if base == "" {
				base = redirectingTo(t, th, canaryKey).URL + "/api/v1"
			}
			done := tc.done
			if done == nil {
				done = func(*observed) bool { return false } // Run ends by itself
			}
			o := runUntil(t, bandonce.Config{APIKey: canaryKey, BaseURL: base, Handler: echo, DisableSocket: true}, done)
			assertNoTrace(t, canaryKey, o.texts()...)
			assert.Zero(t, th.keys.Load(), "a redirect's target got the key")
			if name == "REST 401 quoting the key" {
				require.ErrorIs(t, o.runErr, bandonce.ErrUnauthorized)
			}
		})
	}

	socket := map[string]struct {
		url  func(t *testing.T, th *thief, key string) string
		done func(*observed) bool
	}{
		"socket dial failure": {
			func(t *testing.T, _ *thief, _ string) string {
				return "ws://" + closedAddr(t) + "/api/v1/socket/websocket"
			},
			logged("phoenix: connect failed", 2)},
		"socket TLS failure": {
			func(*testing.T, *thief, string) string { return wsURL(tlsServer) },
			logged("phoenix: connect failed", 2)},
		"socket upgrade refused quoting the key": {
			func(t *testing.T, _ *thief, key string) string {
				return wsURL(echoing(t, func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprintf(w, `{"error":{"code":"%s","message":"%s"}}`, key, r.Header.Get("X-Api-Key"))
				}))
			},
			logged("phoenix: connect failed", 2)},
		"socket upgrade refused for good": {
			func(t *testing.T, _ *thief, key string) string {
				return wsURL(echoing(t, func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusForbidden)
					fmt.Fprintf(w, `{"error":{"code":"forbidden","message":"%s"}}`, key)
				}))
			},
			nil},
		"socket redirect": {
			func(t *testing.T, th *thief, key string) string { return wsURL(redirectingTo(t, th, key)) },
			logged("refused a redirect", 2)},
	}
	for name, tc := range socket {
		t.Run(name, func(t *testing.T) {
			_, agent, base := listeningBand(t)
			th := newThief(t)
			done := tc.done
			if done == nil {
				done = func(*observed) bool { return false }
			}
			o := runUntil(t, bandonce.Config{APIKey: agent.Key, BaseURL: base, SocketURL: tc.url(t, th, agent.Key), Handler: echo}, done)
			assertNoTrace(t, agent.Key, o.texts()...)
			assert.Zero(t, th.keys.Load(), "a redirect's target got the key")
			if tc.done == nil {
				require.ErrorIs(t, o.runErr, bandonce.ErrUnauthorized)
			}
		})
	}
}

// A handler that panics with, or fails with, a text quoting the key: the
// panic's log line and stack, the outcome given to the hooks, and the
// failure reason Band shows in the room hold no trace of it.
func TestAHandlerQuotingTheKeyDoesNotLeakIt(t *testing.T) {
	band, agent, base := listeningBand(t)
	ada := band.AddHuman("ada2")
	room := band.AddRoom("quoting", ada, agent.ID)
	panicID, err := band.Say(room.ID, ada.ID, "panic", agent.ID)
	require.NoError(t, err)
	failID, err := band.Say(room.ID, ada.ID, "fail", agent.ID)
	require.NoError(t, err)
	handler := func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if m.Body() == "panic" {
			panic("request to https://app.band.ai/api/v1?api_key=" + agent.Key + " went wrong")
		}
		return nil, bandonce.Permanent(fmt.Errorf("calling out with X-Api-Key %s: refused", agent.Key))
	}
	deadLetters := func(o *observed) bool { // each is seen by both hooks
		return strings.Count(strings.Join(o.outcomeTexts(), "\n"), "Kind:dead-lettered") >= 4
	}
	o := runUntil(t, bandonce.Config{APIKey: agent.Key, BaseURL: base, Handler: handler, MaxAttempts: 1, DisableSocket: true}, deadLetters)
	require.NoError(t, o.runErr)
	assert.Contains(t, o.logs.String(), "handler panicked")
	assertNoTrace(t, agent.Key, o.texts()...)
	for _, id := range []string{panicID, failID} {
		var reasons []string
		for _, m := range band.Marks(agent.ID, id) {
			reasons = append(reasons, m.Error)
		}
		require.NotEmpty(t, strings.Join(reasons, ""), "message %s was marked failed with a reason", id)
		assertNoTrace(t, agent.Key, reasons...)
	}
}

func assertNoTrace(t *testing.T, key string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, trace := range traces(key) {
			if strings.Contains(text, trace) {
				t.Errorf("%q appears in:\n%s", trace, text)
			}
		}
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

// A reply, a Send or an Event that holds the agent's key, whole, escaped
// or in its metadata, never reaches the room: each is refused with
// ErrKeyInOutput, the message is dead-lettered, and the reason Band stores
// does not quote the key.
func TestOutputHoldingTheKeyIsRefusedAndDeadLettered(t *testing.T) {
	band, agent, base := listeningBand(t)
	ada := band.AddHuman("ada3")
	room := band.AddRoom("leaky", ada, agent.ID)
	bodies := []string{"reply", "escaped", "send", "event", "dedup"}
	var ids []string
	for _, b := range bodies {
		id, err := band.Say(room.ID, ada.ID, b, agent.ID)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	var mu sync.Mutex
	var effectErrs []error
	handler := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		var err error
		switch m.Body() {
		case "reply":
			return &bandonce.Reply{Content: "env:\nBAND_API_KEY=" + agent.Key}, nil
		case "escaped":
			return &bandonce.Reply{Content: "see https://x/?k=" + url.QueryEscape(agent.Key)}, nil
		case "send":
			err = m.Send(ctx, bandonce.Reply{Content: "my key: " + agent.Key})
		case "event":
			err = m.Event(ctx, bandonce.Event{Type: bandonce.EventToolResult, Content: "ran env", Metadata: map[string]any{"stdout": "KEY=" + agent.Key}})
		case "dedup":
			return &bandonce.Reply{Content: "hello", DedupKey: "k:" + agent.Key}, nil
		}
		mu.Lock()
		effectErrs = append(effectErrs, err)
		mu.Unlock()
		return nil, err
	}
	done := func(*observed) bool {
		for _, id := range ids {
			if band.Status(agent.ID, id) != fakeband.StatusProcessed {
				return false
			}
		}
		return true
	}
	o := runUntil(t, bandonce.Config{APIKey: agent.Key, BaseURL: base, Handler: handler, MaxAttempts: 3, DisableSocket: true}, done)
	require.NoError(t, o.runErr)

	var room1 []string
	for _, p := range band.Posts(room.ID) {
		room1 = append(room1, p.Content)
	}
	for _, e := range band.ChatEvents(room.ID) {
		room1 = append(room1, e.Content, string(e.Metadata))
	}
	for _, e := range band.ChatEvents(room.ID) {
		// Only the room's notices that a message was dead-lettered.
		assert.Equal(t, "error", e.MessageType, "no event but a dead-letter notice was sent: %q", e.Content)
		assert.Contains(t, string(e.Metadata), ":dead-letter", "no event but a dead-letter notice was sent: %q", e.Content)
	}
	assert.Len(t, band.ChatEvents(room.ID), len(ids), "each refused message tells its room once")
	for _, p := range band.Posts(room.ID) {
		assert.NotEqual(t, agent.ID, p.SenderID, "no reply was posted: %q", p.Content)
	}
	assertNoTrace(t, agent.Key, room1...)
	assertNoTrace(t, agent.Key, o.texts()...)
	mu.Lock()
	require.Len(t, effectErrs, 2)
	for _, err := range effectErrs {
		require.ErrorIs(t, err, bandonce.ErrKeyInOutput)
		assertNoTrace(t, agent.Key, err.Error())
	}
	mu.Unlock()
	for _, id := range ids {
		var reasons []string
		for _, m := range band.Marks(agent.ID, id) {
			if m.Kind == "failed" {
				reasons = append(reasons, m.Error)
			}
		}
		require.Len(t, reasons, 1, "message %s was dead-lettered at once, not retried", id)
		assert.Contains(t, reasons[0], "contains the agent's API key")
		assertNoTrace(t, agent.Key, reasons...)
	}
}

// A REST root or a socket URL that redirects to another origin is a
// configuration error: Run ends at once with ErrCrossOriginRedirect, long
// before its start-up budget, and the redirect's target never gets the key.
func TestACrossOriginRedirectEndsRunAtOnce(t *testing.T) {
	_, agent, base := listeningBand(t)
	for name, urls := range map[string]func(th *thief) (rest, socket string){
		"REST":   func(th *thief) (string, string) { return redirectingTo(t, th, agent.Key).URL + "/api/v1", "" },
		"socket": func(th *thief) (string, string) { return base, wsURL(redirectingTo(t, th, agent.Key)) },
	} {
		t.Run(name, func(t *testing.T) {
			th := newThief(t)
			rest, socket := urls(th)
			o := runUntil(t, bandonce.Config{APIKey: agent.Key, BaseURL: rest, SocketURL: socket, Handler: echo,
				StartTimeout: time.Hour}, func(*observed) bool { return false })
			require.ErrorIs(t, o.runErr, bandonce.ErrCrossOriginRedirect)
			assert.Contains(t, o.runErr.Error(), "must not redirect to another origin")
			if name == "REST" {
				assert.Contains(t, o.runErr.Error(), "BAND_BASE_URL or BAND_REST_URL through ConfigFromEnv, or Config.BaseURL", "names what the user may have set")
			} else {
				assert.Contains(t, o.runErr.Error(), "(check Config.SocketURL)", "set as a field, named as one")
			}
			assert.Zero(t, th.keys.Load(), "the redirect's target got the key")
			assertNoTrace(t, agent.Key, o.texts()...)
		})
	}
}
