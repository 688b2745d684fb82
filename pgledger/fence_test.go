package pgledger

import (
	"github.com/band-once/bandonce/internal/leaderloop"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeTracker is a request body that records whether it was closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

// The transport lets requests through while the lease holds and fails
// them, closing their bodies, once it does not: run out by this process's
// clock, or given up.
func TestTransportSendsOnlyWhileTheLeaseHolds(t *testing.T) {
	sent := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
	})
	ls := leaderloop.NewLease(4, nil, time.Now().Add(time.Hour))
	rt := (&Ledger{store: &Store{opts: Options{AgentID: testAgent}}, lease: ls}).Transport(base)
	post := func() (*closeTracker, error) {
		body := &closeTracker{Reader: strings.NewReader("{}")}
		req, err := http.NewRequest(http.MethodPost, "http://band.test/api/v1/agent/chats/r/messages", body)
		require.NoError(t, err)
		res, err := rt.RoundTrip(req)
		if err == nil {
			_ = res.Body.Close()
		}
		return body, err
	}

	_, err := post()
	require.NoError(t, err)
	assert.Equal(t, 1, sent)

	ls.Extend(time.Now().Add(-time.Millisecond)) // woken past its deadline
	body, err := post()
	require.ErrorIs(t, err, ErrFenced)
	assert.Contains(t, err.Error(), "POST /api/v1/agent/chats/r/messages")
	assert.Contains(t, err.Error(), "ran out by this process's clock")
	assert.True(t, body.closed, "the body is closed, as a RoundTripper must")

	ls.Extend(time.Now().Add(time.Hour))
	ls.End("another process took the lease over")
	_, err = post()
	require.ErrorIs(t, err, ErrFenced)
	assert.Contains(t, err.Error(), "another process took the lease over")
	assert.Equal(t, 1, sent, "nothing else was sent")
}
