package fakeband

import (
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// Listen serves the Band on a real TCP listener (addr like
// "127.0.0.1:0") until Close, and returns its REST root
// ("http://127.0.0.1:PORT/api/v1"). The socket is at
// {root}/socket/websocket with scheme ws. It may be called more than once.
func (b *Band) Listen(addr string) (baseURL string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{
		Handler:           b.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// net/http logs odd client behaviour to stderr by default.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		ln.Close()
		return "", ErrClosed
	}
	b.servers = append(b.servers, srv)
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		_ = srv.Serve(ln) // returns ErrServerClosed after Close
	}()
	return "http://" + ln.Addr().String() + APIPrefix, nil
}
