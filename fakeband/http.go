package fakeband

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// APIPrefix is where every route lives.
const APIPrefix = "/api/v1"

// call is one authenticated request on its way to a handler.
type call struct {
	r     *http.Request
	who   *participant
	fault *Fault // the fault that fired for this request, if any
}

// reply is a handler's answer; the middleware renders it so a fault can
// still drop it after the handler applied its effects.
type reply struct {
	status int
	data   any // wrapped as {"data": ...}; nil with 204 means no body
	meta   any // "metadata", lists only
	err    *Error
	// legacyMeta repeats meta as the deprecated "meta" (/context only).
	legacyMeta bool
	// deprecated marks an answer to deprecated page/page_size paging with
	// Band's Deprecation and Sunset headers.
	deprecated bool
}

func okReply(status int, data any) reply { return reply{status: status, data: data} }
func errReply(e *Error) reply            { return reply{err: e} }

// side is which kind of key a route accepts.
type side int

const (
	agentSide side = iota
	humanSide
)

type route struct {
	pattern string
	ep      Endpoint
	side    side
	serve   func(c *call) reply
}

// Handler returns the Band's http.Handler: the REST API and the socket
// under /api/v1, and with Options.Admin the admin API under AdminPrefix.
// Unknown paths answer a JSON 404.
func (b *Band) Handler() http.Handler { return b.handler }

// routes is the Band's handler. Without the admin API every Band serves
// the same patterns, so they share one route table, built once: a table
// costs more to build than a short-lived Band (one prover schedule)
// spends on its requests. Its handlers find their Band in the response
// writer the Band's handler wraps.
func (b *Band) routes(admin bool) http.Handler {
	b.api = b.apiRoutes()
	if !admin {
		return &bandHandler{b: b, mux: sharedRoutes()}
	}
	mux := http.NewServeMux()
	for _, rt := range b.api {
		mux.Handle(rt.pattern, b.apiHandler(rt))
	}
	b.socketRoute(mux)
	b.adminRoutes(mux)
	mux.HandleFunc("/", b.serveNotFound)
	return mux
}

// apiRoutes are the REST routes, agents' then humans'.
func (b *Band) apiRoutes() []route {
	return append(b.agentRoutes(), b.humanRoutes()...)
}

// sharedRoutes is the route table of every Band without the admin API.
var sharedRoutes = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	for i, rt := range (*Band)(nil).apiRoutes() { // the patterns only
		mux.Handle(rt.pattern, sharedRoute(i))
	}
	mux.HandleFunc("GET "+socketPath, func(w http.ResponseWriter, r *http.Request) {
		bw := w.(*bandWriter)
		bw.b.serveSocket(bw.ResponseWriter, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		bw := w.(*bandWriter)
		bw.b.serveNotFound(bw.ResponseWriter, r)
	})
	return mux
})

// bandHandler serves the shared route table for one Band.
type bandHandler struct {
	b   *Band
	mux *http.ServeMux
}

func (h *bandHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(&bandWriter{ResponseWriter: w, b: h.b}, r)
}

// bandWriter carries the Band through the shared route table, whose
// handlers unwrap it at once: a handler writes to (and hijacks) the
// server's own writer. The request is not copied for it, as a context
// value would need.
type bandWriter struct {
	http.ResponseWriter
	b *Band
}

// sharedRoute is the shared table's handler of a Band's route b.api[i].
type sharedRoute int

func (i sharedRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bw := w.(*bandWriter)
	bw.b.serveAPI(bw.b.api[i], bw.ResponseWriter, r)
}

func (b *Band) serveNotFound(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	reqID := b.requestIDLocked()
	b.mu.Unlock()
	writeReply(w, errReply(notFound("route")), reqID)
}

// apiHandler is rt's handler on b.
func (b *Band) apiHandler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.serveAPI(rt, w, r) })
}

// serveAPI serves a request on a route with what every request goes
// through, in order: counting, fault selection, the fault's effect,
// authentication, the handler, and rendering (or losing) the answer.
func (b *Band) serveAPI(rt route, w http.ResponseWriter, r *http.Request) {
	logged := b.beginRequest(rt.ep, r)
	defer b.endRequest(logged)
	note := func(status int, outcome string) {
		if logged != nil {
			logged.Status, logged.Outcome = status, outcome
		}
	}
	f, reqID, open := b.admit(rt.ep, r)
	if !open {
		note(errClosedBand.Status, OutcomeClosed)
		writeReply(w, errReply(errClosedBand), reqID)
		return
	}
	if f != nil {
		if logged != nil {
			logged.Fault = f.Kind.String()
		}
		switch f.Kind {
		case FailBefore:
			note(cmp.Or(f.Status, http.StatusServiceUnavailable), OutcomeAnswered)
			writeFailBefore(w, f, reqID)
			return
		case Delay:
			if !b.wait(r.Context(), f.Delay) {
				note(0, OutcomeAbandoned)
				return // the client gave up or the Band is closing
			}
		case ApplyLate:
			var ok bool
			if r, ok = b.holdDetached(r, f.Delay); !ok {
				note(0, OutcomeClosed)
				return // the Band is closing
			}
			defer b.appliedLate(rt.ep)
		}
	}
	var rep reply
	// The key's header by its canonical name: Get would canonicalise
	// "X-API-Key" on every request.
	if who, err := b.authenticate(rt.side, r.Header.Get("X-Api-Key")); err != nil {
		rep = errReply(err)
	} else if !boundBody(r) {
		rep = errReply(ErrTooLarge)
	} else {
		rep = rt.serve(&call{r: r, who: who, fault: f})
	}
	status := rep.status
	if rep.err != nil {
		status = rep.err.Status
	}
	if f != nil && f.Kind == LoseResponse {
		note(status, OutcomeLost)
		loseResponse(w)
		return
	}
	note(status, OutcomeAnswered)
	writeReply(w, rep, reqID)
}

// admit counts the request and picks its fault: the rate limit's 429
// first, then the fault rules; open is false after Close.
func (b *Band) admit(ep Endpoint, r *http.Request) (f *Fault, reqID string, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	reqID = b.requestIDLocked()
	if b.closed {
		return nil, reqID, false
	}
	b.truth.reqs[ep]++
	if b.rate.limit != nil && r != nil {
		if f := b.throttleLocked(ep, r.Header.Get("X-Api-Key")); f != nil {
			return f, reqID, true
		}
	}
	return b.pickFaultLocked(ep), reqID, true
}

// requestIDLocked numbers a request for its error envelope and header.
func (b *Band) requestIDLocked() string {
	b.nReq++
	return "req-" + strconv.Itoa(b.nReq)
}

// errClosedBand answers every request after Close.
var errClosedBand = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "fake Band is closed"}

// holdDetached holds r for d whatever its client does, and returns it cut
// loose from its client: the body read in full, the context never ending
// with the connection. ok is false when the Band closed meanwhile, or the
// body could not be read before the client went away.
func (b *Band) holdDetached(r *http.Request, d time.Duration) (_ *http.Request, ok bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, false
	}
	held := r.Clone(context.WithoutCancel(r.Context()))
	held.Body = io.NopCloser(bytes.NewReader(body))
	if !b.wait(context.Background(), d) {
		return nil, false
	}
	return held, true
}

// appliedLate counts a held request that has been applied.
func (b *Band) appliedLate(ep Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults.fired[string(ep)+"/applied_late"]++
}

// wait sleeps d unless ctx ends or the Band closes first.
func (b *Band) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-b.closing:
	}
	return false
}

// authenticate finds the key's participant: 401 for an unknown key, 403
// for the wrong kind of key. Participants are never removed, so the
// pointer stays valid after the lock is released.
func (b *Band) authenticate(s side, key string) (*participant, *Error) {
	b.mu.Lock()
	p := b.byKey[key]
	b.mu.Unlock()
	switch {
	case key == "" || p == nil:
		return nil, &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "missing or invalid API key"}
	case s == agentSide && !p.isAgent():
		return nil, forbidden("Agent authentication required")
	case s == humanSide && p.isAgent():
		return nil, forbidden("User authentication required")
	}
	return p, nil
}

// boundBody reads the request's body, up to MaxBody bytes, in place of
// the stream, and reports whether it fit.
func boundBody(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	data, err := readAtMost(r.Body, MaxBody+1, r.ContentLength)
	if err != nil {
		data = nil // a body cut off is the handlers' to refuse, as before
	}
	b := &readBody{data: data}
	b.Reset(data)
	r.Body = b
	return len(data) <= MaxBody
}

// readBody is a body boundBody read already; decodeBody uses its bytes
// without reading them again.
type readBody struct {
	bytes.Reader
	data []byte
}

func (*readBody) Close() error { return nil }

// preallocMax bounds the buffer readAtMost allocates on a body's declared
// length alone: a client may declare a MiB and send nothing.
const preallocMax = 64 << 10

// readAtMost reads up to limit bytes of body, in one buffer of the
// declared length when there is one and it is small; a larger body grows
// its buffer as its bytes arrive.
func readAtMost(body io.Reader, limit, declared int64) ([]byte, error) {
	if declared > 0 && declared < limit && declared < preallocMax {
		data := make([]byte, declared+1) // the extra byte finds EOF, or more than declared
		n, err := io.ReadFull(body, data)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			return data[:n], nil
		case err != nil:
			return nil, err
		}
		rest, err := io.ReadAll(io.LimitReader(body, limit-int64(n)))
		return append(data, rest...), err
	}
	return io.ReadAll(io.LimitReader(body, limit))
}
