package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/memnet"
)

// canaryKey is recognisable anywhere; canaryCore is the part of it no
// text may hold, even cut short.
const (
	canaryKey  = "band_a_L3AKC4NARY0123456789abcdef"
	canaryCore = "L3AKC4"
)

// assertNoKey fails if any text holds the key, or the core of it.
func assertNoKey(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		assert.NotContains(t, text, canaryCore, "%s: %s", what, text)
	}
}

// errorTexts is everything a caller could print of err: its message, its
// %+v, and the fields of the typed errors it wraps.
func errorTexts(err error) []string {
	texts := []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		texts = append(texts, fmt.Sprintf("%+v", *apiErr))
	}
	var protoErr *ProtocolError
	if errors.As(err, &protoErr) {
		texts = append(texts, fmt.Sprintf("%+v", *protoErr))
	}
	return texts
}

// everyCall makes each exported call once and returns its error.
func everyCall(ctx context.Context, c *Client) map[string]error {
	errs := map[string]error{}
	_, errs["Me"] = c.Me(ctx)
	_, errs["Chats"] = c.Chats(ctx)
	_, errs["Next"] = c.Next(ctx, "c1")
	_, errs["Processing"] = c.Processing(ctx, "c1", "m1")
	_, errs["Processed"] = c.Processed(ctx, "c1", "m1")
	_, errs["Failed"] = c.Failed(ctx, "c1", "m1", "boom")
	_, errs["Post"] = c.Post(ctx, "c1", "hi", nil)
	_, errs["Context"] = c.Context(ctx, "c1", "", 0)
	return errs
}

// A server (or a proxy before it) that quotes the key back, in every
// place an answer can carry text, never gets it into an error.
func TestNoErrorQuotesTheKeyAServerEchoed(t *testing.T) {
	long := strings.Repeat("x", MaxBodyExcerpt-15) + canaryKey // the excerpt cuts the key in two
	cases := map[string]struct {
		status int
		header http.Header
		body   string
	}{
		"401 envelope": {401, nil, `{"error":{"code":"bad_key ` + canaryKey + `","message":"key ` + canaryKey + ` revoked",` +
			`"request_id":"` + canaryKey + `","details":{"/` + canaryKey + `":["` + canaryKey + `"]}}}`},
		"bare string error":   {403, nil, `{"error":"forbidden for ` + canaryKey + `"}`},
		"proxy html":          {502, nil, "<html>X-Api-Key: " + canaryKey + "</html>"},
		"excerpt cuts it":     {500, nil, long},
		"request id header":   {503, http.Header{"X-Request-Id": {canaryKey}}, ""},
		"2xx not json":        {200, nil, "debug: " + canaryKey},
		"2xx wrong data type": {200, nil, `{"data":"` + canaryKey + `"}`},
		"2xx cut":             {200, nil, long},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Body != nil {
					r.Body.Close()
				}
				return &http.Response{StatusCode: tc.status, Header: tc.header.Clone(), Request: r,
					Body: io.NopCloser(strings.NewReader(tc.body))}, nil
			})
			c := NewClient(testBase, canaryKey, NewRetryDoer(&http.Client{Transport: rt}, once))
			for call, err := range everyCall(t.Context(), c) {
				require.Error(t, err, call)
				assertNoKey(t, call, errorTexts(err)...)
			}
		})
	}
}

// A transport that quotes the key in its error (a proxy's message, a
// URL someone put it in) has it scrubbed; errors.Is still sees through.
func TestATransportErrorQuotingTheKeyIsScrubbed(t *testing.T) {
	cause := errors.New("proxyconnect: 407 for " + canaryKey)
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, cause
	})
	c := NewClient(testBase, canaryKey, NewRetryDoer(&http.Client{Transport: rt}, RetryOptions{MaxAttempts: 2}))
	for call, err := range everyCall(t.Context(), c) {
		require.ErrorIs(t, err, cause, call)
		assertNoKey(t, call, errorTexts(err)...)
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestRealTransportFailuresDoNotShowTheKey(t *testing.T) {
	tlsServer := quietTLSServer()
	defer tlsServer.Close()
	for name, base := range map[string]string{
		"connection refused": "http://" + closedAddr(t) + "/api/v1",
		"untrusted TLS":      tlsServer.URL + "/api/v1",
	} {
		t.Run(name, func(t *testing.T) {
			c := NewClient(base, canaryKey, NewRetryDoer(&http.Client{}, once))
			for call, err := range everyCall(t.Context(), c) {
				require.Error(t, err, call)
				assertNoKey(t, call, errorTexts(err)...)
			}
		})
	}
}

// A redirect to another origin is not followed: net/http would copy
// X-API-Key there. It is refused at once, not retried.
func TestARedirectElsewhereNeverCarriesTheKey(t *testing.T) {
	var keysElsewhere atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			keysElsewhere.Add(1)
		}
	}))
	defer elsewhere.Close()
	var homeHits atomic.Int32
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		homeHits.Add(1)
		// A Location that quotes the key, as a careless server might.
		http.Redirect(w, r, elsewhere.URL+"/steal?k="+canaryKey, http.StatusTemporaryRedirect)
	}))
	defer home.Close()

	c := NewClient(home.URL+"/api/v1", canaryKey, NewRetryDoer(nil, RetryOptions{MaxAttempts: 3}))
	_, err := c.Me(t.Context())
	require.ErrorIs(t, err, keyguard.ErrCrossOriginRedirect)
	assertNoKey(t, "Me", errorTexts(err)...)
	assert.Equal(t, int32(1), homeHits.Load(), "a refused redirect is not retried")
	for call, err := range everyCall(t.Context(), c) {
		require.ErrorIs(t, err, keyguard.ErrCrossOriginRedirect, call)
		assertNoKey(t, call, errorTexts(err)...)
	}
	assert.Zero(t, keysElsewhere.Load())
}

// The failure reason is shown to the room: the key is taken out before
// the reason is cut, so not even a piece of it is sent.
func TestFailedReasonNeverCarriesTheKey(t *testing.T) {
	for _, pad := range []int{0, MaxFailureReason - 20, MaxFailureReason - 5} {
		s := newStub(sequence(ok(200, markJSON)))
		c := NewClient(testBase, canaryKey, NewRetryDoer(memnet.Client(s), once))
		_, err := c.Failed(t.Context(), "c1", "m1", strings.Repeat("r", pad)+"handler quoted "+canaryKey)
		require.NoError(t, err)
		hits := s.requests()
		require.Len(t, hits, 1)
		assertNoKey(t, "reason sent", hits[0].Body)
		assert.Equal(t, canaryKey, hits[0].Header.Get("X-Api-Key"), "the header is the one place the key goes")
	}
}

// Printing a Client shows no key.
func TestPrintingAClientShowsNoKey(t *testing.T) {
	c := NewClient(testBase, canaryKey, nil)
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		assertNoKey(t, format, fmt.Sprintf(format, c), fmt.Sprintf(format, *c))
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%v", []*Client{c})
	assertNoKey(t, "slice", buf.String())
}

// quietTLSServer is a TLS server whose certificate no client trusts. The
// handshake errors it sees are the point; they are not logged to stderr.
func quietTLSServer() *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	return srv
}
