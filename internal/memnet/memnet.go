// Package memnet serves an http.Handler to an http.Client in process, with
// no sockets, so tests can run under testing/synctest with virtual time and
// still go through the real net/http client stack. WebSocket upgrades work
// too: the handler hijacks one end of a net.Pipe and the client's response
// body is the other.
package memnet

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Transport is an http.RoundTripper that calls Handler directly.
type Transport struct {
	Handler http.Handler
}

// Client returns an *http.Client whose requests h serves in process.
func Client(h http.Handler) *http.Client {
	return &http.Client{Transport: &Transport{Handler: h}}
}

// ErrHandlerAbandoned is returned when the request's context ends before
// the handler has answered.
var ErrHandlerAbandoned = errors.New("memnet: request context ended before the response")

// RoundTrip implements http.RoundTripper. The request body is read in full
// before the handler runs, as a server would have received it. A plain
// request's handler reads the client's header map itself, not a copy: it
// must not change it (a server's request is the handler's to change, and
// fakeband's handlers never do).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readRequestBody(req)
	if err != nil {
		return nil, err
	}
	if isUpgrade(req) {
		return t.upgrade(req, body)
	}
	// One allocation holds the server's request, the recorder and the
	// response: a request costs the handler's work, little more.
	x := &exchange{rec: recorder{header: make(http.Header, 4)}, done: make(chan struct{})}
	x.fill(req, body)
	go x.serve(t.Handler)
	select {
	case <-x.done:
	case <-req.Context().Done():
		// The handler sees the same context and is expected to notice;
		// the client does not wait for it.
		return nil, errors.Join(ErrHandlerAbandoned, context.Cause(req.Context()))
	}
	return x.response(req), nil
}

// readRequestBody reads the request's body whole, in one buffer when its
// length is declared.
func readRequestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if n := req.ContentLength; n > 0 && n < 1<<30 {
		body := make([]byte, n+1) // the extra byte finds EOF, or a longer body
		got, err := io.ReadFull(req.Body, body)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			return body[:got], nil
		case err != nil:
			return nil, err
		}
		rest, err := io.ReadAll(req.Body)
		return append(body, rest...), err
	}
	return io.ReadAll(req.Body)
}

// exchange is one plain request and its answer.
type exchange struct {
	sreq     http.Request
	url      url.URL
	reqBody  bodyReader
	rec      recorder
	resp     http.Response
	respBody bodyReader
	done     chan struct{} // closed when the handler returned
}

// fill makes x.sreq the request the handler gets: req as a server would
// have read it off the wire, on req's context.
func (x *exchange) fill(req *http.Request, body []byte) {
	x.sreq = *req
	x.url = *req.URL
	x.sreq.URL = &x.url
	if x.sreq.Header == nil {
		x.sreq.Header = make(http.Header)
	}
	x.reqBody.Reset(body)
	x.sreq.Body = &x.reqBody
	if req.Body == nil || req.Body == http.NoBody {
		x.sreq.Body = http.NoBody // as a server gives a request without one
	}
	x.sreq.GetBody = nil
	x.sreq.ContentLength = int64(len(body))
	x.sreq.RequestURI = req.URL.RequestURI()
	x.sreq.RemoteAddr = "memnet:0"
	if x.sreq.Host == "" {
		x.sreq.Host = req.URL.Host
	}
}

// bodyReader is a body read from memory; closing it does nothing.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

func (x *exchange) serve(h http.Handler) {
	defer close(x.done)
	h.ServeHTTP(&x.rec, &x.sreq)
}

// response is the client's answer, once the handler returned.
func (x *exchange) response(req *http.Request) *http.Response {
	x.respBody.Reset(x.rec.body.Bytes())
	x.resp = http.Response{
		Status:        statusLine(cmp.Or(x.rec.status, http.StatusOK)),
		StatusCode:    cmp.Or(x.rec.status, http.StatusOK),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        x.rec.header,
		Body:          &x.respBody,
		ContentLength: int64(x.rec.body.Len()),
		Request:       req,
	}
	return &x.resp
}

func isUpgrade(req *http.Request) bool {
	return strings.EqualFold(req.Header.Get("Upgrade"), "websocket")
}

func serverRequest(req *http.Request, ctx context.Context, body []byte) *http.Request {
	sreq := req.Clone(ctx)
	sreq.Body = io.NopCloser(bytes.NewReader(body))
	sreq.ContentLength = int64(len(body))
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "memnet:0"
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	return sreq
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorder) response(req *http.Request) *http.Response {
	resp := newResponse(req, r.status, http.StatusOK, r.header, io.NopCloser(bytes.NewReader(r.body.Bytes())))
	resp.ContentLength = int64(r.body.Len())
	return resp
}

// statusLines are the status lines of the common answers, made once.
var statusLines = func() map[int]string {
	m := make(map[int]string)
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = strconv.Itoa(code) + " " + text
		}
	}
	return m
}()

// statusLine is a response's Status, as net/http's client parses it.
func statusLine(code int) string {
	if line, ok := statusLines[code]; ok {
		return line
	}
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

// newResponse is the answer net/http's client would have parsed off the
// wire; status 0 means the handler never set one, so fallback applies.
func newResponse(req *http.Request, status, fallback int, header http.Header, body io.ReadCloser) *http.Response {
	if status == 0 {
		status = fallback
	}
	return &http.Response{
		Status:     statusLine(status),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
		Body:       body,
		Request:    req,
	}
}

// upgrade runs the handler with a hijackable writer. If the handler
// hijacks, the client gets a 101 whose body is its end of the pipe; if it
// answers normally (a refused upgrade), the client gets that answer.
func (t *Transport) upgrade(req *http.Request, body []byte) (*http.Response, error) {
	// The connection outlives the dial's context, as a real one does.
	sreq := serverRequest(req, context.WithoutCancel(req.Context()), body)
	client, server := net.Pipe()
	w := &hijacker{recorder: recorder{header: make(http.Header)}, conn: server, hijacked: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Handler.ServeHTTP(w, sreq)
		if !w.wasHijacked() {
			server.Close()
		}
	}()
	select {
	case <-w.hijacked:
		return newResponse(req, w.status, http.StatusSwitchingProtocols, w.header, client), nil
	case <-done:
		client.Close()
		return w.response(req), nil
	case <-req.Context().Done():
		client.Close()
		return nil, errors.Join(ErrHandlerAbandoned, context.Cause(req.Context()))
	}
}

type hijacker struct {
	recorder
	conn     net.Conn
	hijacked chan struct{}
	mu       sync.Mutex
	done     bool
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return nil, nil, errors.New("memnet: already hijacked")
	}
	h.done = true
	close(h.hijacked)
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

func (h *hijacker) wasHijacked() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}
