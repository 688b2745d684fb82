package wire

import (
	"context"
	"io"
	"net/http"
	"time"
)

// deadlineTransport bounds each request (each retry attempt) with a
// context deadline that lasts until its body is closed. It does what
// http.Client.Timeout does without the goroutine and timer net/http starts
// per request for a RoundTripper that is not an *http.Transport (a test
// double, a tracing wrapper).
type deadlineTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if d, ok := req.Context().Deadline(); ok && !d.After(time.Now().Add(t.timeout)) {
		// An earlier deadline bounds it already (a mark's): a second one
		// would cost a context and a timer and change nothing.
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases the request's deadline once its body is done.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// RequestClients returns the client for REST calls, each passing the
// limiter and then bounded by timeout (unless the caller's client has a
// Timeout of its own, which then bounds the wait for the limiter too), and
// the client for the socket's upgrade, which must not be bounded: the
// connection it opens lives on. A client made here already (its
// transport passes a Limiter) is returned as it is, so a second client
// built from the first shares its budget.
func RequestClients(base *http.Client, timeout time.Duration, limiter *Limiter) (rest, socket *http.Client) {
	if base == nil {
		base = &http.Client{}
	}
	socket = new(http.Client)
	*socket = *base
	socket.Timeout = 0
	if _, made := base.Transport.(*LimitedTransport); made {
		return base, socket
	}
	next := base.Transport
	if next == nil {
		// Keep as many connections to Band idle as may be in flight:
		// net/http's default keeps two, and a busy agent would open and
		// close connections all day.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = limiter.maxInFlight
		next = t
	}
	if base.Timeout == 0 {
		next = &deadlineTransport{next: next, timeout: timeout}
	}
	rest = new(http.Client)
	*rest = *base
	rest.Transport = &LimitedTransport{Next: next, Limiter: limiter}
	return rest, socket
}
