package fakeband

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	return &http.Client{Transport: &loseTransport{next: &inlineTransport{b: b, next: &memnet.Transport{Handler: b.handler}}}}
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

// inlineTransport serves a plain request on the caller's goroutine while
// no fault rule may hold a request: every handler then answers without
// waiting on anything but the Band's lock, so the caller would only wait
// for memnet's goroutine, whose start, stack growth and two hand-offs
// were a fifth of a message's CPU time. Its answer is the one memnet
// gives: the body read whole first, the handler on the request's
// context, ErrHandlerAbandoned once that context has ended. Upgrades,
// and every request while a Delay or ApplyLate rule is in place (their
// client must be able to give up while the handler holds on), go to next.
type inlineTransport struct {
	b    *Band
	next http.RoundTripper // memnet's
}

func (t *inlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.b.mayHold.Load() || strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		return t.next.RoundTrip(req)
	}
	// One allocation holds the server's request, the writer and the
	// response. The handler reads the client's header map, not a copy, as
	// memnet's does: the Band's handlers never change it.
	x := &inlineExchange{w: inlineWriter{header: make(http.Header, 4)}}
	x.sreq = *req
	x.url = *req.URL
	x.sreq.URL = &x.url
	if x.sreq.Header == nil {
		x.sreq.Header = make(http.Header)
	}
	x.sreq.Body, x.sreq.ContentLength = http.NoBody, 0
	if req.Body != nil && req.Body != http.NoBody {
		body, err := readAll(req.Body, req.ContentLength)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		x.reqBody.Reset(body)
		x.sreq.Body, x.sreq.ContentLength = &x.reqBody, int64(len(body))
	}
	x.sreq.GetBody = nil
	x.sreq.RequestURI = req.URL.RequestURI()
	x.sreq.RemoteAddr = "memnet:0"
	if x.sreq.Host == "" {
		x.sreq.Host = req.URL.Host
	}
	t.b.handler.ServeHTTP(&x.w, &x.sreq)
	if ctx := req.Context(); ctx.Err() != nil {
		return nil, errors.Join(memnet.ErrHandlerAbandoned, context.Cause(ctx))
	}
	status := cmp.Or(x.w.status, http.StatusOK)
	x.respBody.Reset(x.w.body.Bytes())
	x.resp = http.Response{
		Status: statusLine(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: x.w.header, Body: &x.respBody,
		ContentLength: int64(x.w.body.Len()), Request: req,
	}
	return &x.resp, nil
}

// readAll reads a request body whole, in one buffer when its length n is
// declared (the extra byte finds EOF, or a longer body).
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 || n > maxBody {
		return io.ReadAll(r)
	}
	body := make([]byte, n+1)
	got, err := io.ReadFull(r, body)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return body[:got], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r)
	return append(body, rest...), err
}

// inlineExchange is one inline request and its answer.
type inlineExchange struct {
	sreq     http.Request
	url      url.URL
	reqBody  memBody
	w        inlineWriter
	resp     http.Response
	respBody memBody
}

// memBody is a body in memory; closing it does nothing.
type memBody struct{ bytes.Reader }

func (*memBody) Close() error { return nil }

// inlineWriter records an answer, as memnet's recorder does: it cannot be
// hijacked, so loseResponse marks a lost answer with lostHeader.
type inlineWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *inlineWriter) Header() http.Header { return w.header }

func (w *inlineWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *inlineWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// statusLine is a response's Status, as net/http's client parses it.
func statusLine(code int) string {
	if text := statusTexts[code]; text != "" {
		return text
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// statusTexts are the status lines of the answers the Band gives, made once.
var statusTexts = func() map[int]string {
	m := make(map[int]string)
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = strconv.Itoa(code) + " " + text
		}
	}
	return m
}()

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
