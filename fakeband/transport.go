package fakeband

import (
	"errors"
	"net/http"

	"github.com/band-once/bandonce/internal/memnet"
)

// Host is the host name of the in-memory URLs: a name under localhost,
// which RFC 6761 keeps for loopback, since these requests never leave
// the process.
const Host = "band.localhost"

// ErrResponseLost is the transport error the in-memory client returns for
// a request whose response a LoseResponse fault dropped. The request was
// applied.
var ErrResponseLost = errors.New("fakeband: response lost after the request was applied")

// lostHeader marks a dropped response on its way back through memnet,
// which cannot hijack plain requests; loseTransport turns it into an error.
const lostHeader = "X-Fakeband-Response-Lost"

// HTTPClient returns a client that reaches the Band in process, with no
// sockets, WebSocket upgrades included. Use it with BaseURL and SocketURL.
func (b *Band) HTTPClient() *http.Client {
	return &http.Client{Transport: &loseTransport{next: &memnet.Transport{Handler: b.handler}}}
}

// BaseURL is the REST root for HTTPClient.
func (b *Band) BaseURL() string { return "http://" + Host + APIPrefix }

// SocketURL is the Phoenix socket endpoint for HTTPClient.
func (b *Band) SocketURL() string { return "ws://" + Host + APIPrefix + "/socket/websocket" }

type loseTransport struct{ next http.RoundTripper }

func (t *loseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.Header.Get(lostHeader) != "" {
		resp.Body.Close()
		return nil, ErrResponseLost
	}
	return resp, nil
}

// loseResponse drops the answer. On a connection that can be hijacked it
// closes the connection without a byte of response; the marker header is
// set first so that memnet, which hands a hijacked upgrade's headers to
// the client, still lets loseTransport recognise the loss. Elsewhere the
// marker alone tells loseTransport.
func loseResponse(w http.ResponseWriter) {
	w.Header().Set(lostHeader, "1")
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
		return
	}
	w.WriteHeader(http.StatusOK)
}
