package proof

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// serveInline serves a plain (non-upgrade) request with the fake's
// handler on the caller's goroutine. The gate already serialises
// requests, so nothing is gained by a goroutine per request, and the
// caller's stack is warm: this halves the cost of a request. A response
// the fake chose to lose (it hijacks the connection to drop it) becomes
// fakeband.ErrResponseLost, as with the fake's own client.
func serveInline(h http.Handler, req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, context.Cause(req.Context())
	}
	// One allocation holds the server's request, the writer and the
	// response; the handler reads the client's header, which the fake
	// never changes.
	x := &inlineExchange{w: inlineWriter{header: make(http.Header, 4)}}
	x.sreq = *req
	x.url = *req.URL
	x.sreq.URL = &x.url
	x.sreq.Body = http.NoBody
	x.sreq.GetBody = nil
	x.sreq.ContentLength = 0
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		x.reqBody.Reset(body)
		x.sreq.Body = &x.reqBody
		x.sreq.ContentLength = int64(len(body))
	}
	x.sreq.RequestURI = req.URL.RequestURI()
	x.sreq.RemoteAddr = "proof:0"
	if x.sreq.Host == "" {
		x.sreq.Host = req.URL.Host
	}
	h.ServeHTTP(&x.w, &x.sreq)
	if x.w.hijacked {
		return nil, fakeband.ErrResponseLost
	}
	status := cmp.Or(x.w.status, http.StatusOK)
	x.respBody.Reset(x.w.body.Bytes())
	x.resp = http.Response{
		Status: http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: x.w.header, Body: &x.respBody,
		ContentLength: int64(x.w.body.Len()), Request: req,
	}
	return &x.resp, nil
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

func isUpgrade(req *http.Request) bool {
	return strings.EqualFold(req.Header.Get("Upgrade"), "websocket")
}

// inlineWriter records a response; hijacking it means the connection was
// dropped.
type inlineWriter struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	hijacked bool
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

func (w *inlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, errors.New("proof: already hijacked")
	}
	w.hijacked = true
	c := deadConn{}
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// deadConn is the connection a hijacked inline request gets: closed.
type deadConn struct{}

func (deadConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (deadConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (deadConn) Close() error                     { return nil }
func (deadConn) LocalAddr() net.Addr              { return inlineAddr{} }
func (deadConn) RemoteAddr() net.Addr             { return inlineAddr{} }
func (deadConn) SetDeadline(time.Time) error      { return nil }
func (deadConn) SetReadDeadline(time.Time) error  { return nil }
func (deadConn) SetWriteDeadline(time.Time) error { return nil }

type inlineAddr struct{}

func (inlineAddr) Network() string { return "proof" }
func (inlineAddr) String() string  { return "proof:0" }
