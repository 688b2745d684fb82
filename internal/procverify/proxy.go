package procverify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// proxy stands between one life of the agent and the fake Band, on a
// loopback port of its own. Every REST request is applied to the fake in
// process, after the schedule's event for it (if any) has had its say:
// held while the process is killed, answered 429 or 5xx, delayed, applied
// with its answer lost, or held while a control signal travels. The
// socket is tunnelled to the fake's listener and watched, so the engine
// knows when a push has passed to the agent.
type proxy struct {
	s      *sim
	l      *life
	ln     net.Listener
	srv    *http.Server
	addr   string
	tunnel *httputil.ReverseProxy
}

var discard = log.New(io.Discard, "", 0)

func newProxy(s *sim, l *life) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{s: s, l: l, ln: ln, addr: ln.Addr().String()}
	target := &url.URL{Scheme: "http", Host: s.fakeHost}
	p.tunnel = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ModifyResponse: func(resp *http.Response) error {
			if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
				l.socketsOpen.Add(1)
				ws := &watchedSocket{rwc: rwc, l: l}
				l.addSocket(ws)
				resp.Body = ws
			}
			return nil
		},
		ErrorLog:     discard,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	p.srv = &http.Server{Handler: p, ErrorLog: discard, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// close cuts every connection of the life, the socket tunnel's included.
func (p *proxy) close() {
	_ = p.srv.Close()
	p.l.closeSockets()
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, l := p.s, p.l
	l.mu.Lock()
	l.connected = true
	l.mu.Unlock()
	ep, room, msg := classify(r.Method, r.URL.Path)
	a := s.arrive(l, ep, room, msg)
	if ep == fakeband.EndpointSocket {
		p.tunnel.ServeHTTP(w, r)
		return
	}
	defer s.leave()
	// A byte past the fake's bound, so that a body over it is answered
	// 413 there, as Band would, not cut into JSON that does not parse.
	body, err := io.ReadAll(io.LimitReader(r.Body, fakeband.MaxBody+1))
	if err != nil {
		return
	}
	ev := s.match(l, ep)
	if ev == nil {
		p.forward(w, r, body, a, nil)
		return
	}
	s.trace("event: " + ev.String())
	advanced := false
	defer func() {
		if !advanced {
			s.advance()
		}
	}()
	switch ev.Kind {
	case KillBefore:
		s.count("kill_before_send")
		s.excuse(1)
		s.restart(l, nil)
		abort(w)
	case KillAfter:
		s.count("kill_after_apply")
		s.excuse(1)
		s.restart(l, func() { s.serve(r, body, a, nil) })
		abort(w)
	case LoseResponse:
		s.count("lost_response")
		s.excuse(1)
		s.applyFor(l, r, body, a, nil)
		abort(w)
	case Throttle:
		f := fakeband.Fault{Endpoint: ep, Nth: 1, Kind: fakeband.FailBefore, Status: http.StatusTooManyRequests, RetryAfter: ev.RetryAfter}
		name := "throttle_429_retry_after"
		if ev.RetryAfter == "" {
			f.EmptyBody, name = true, "throttle_429_empty"
		}
		s.count(name)
		s.excuse(1)
		p.forward(w, r, body, a, &f)
	case ServerError:
		s.count("server_5xx")
		s.excuse(max(ev.Count, 1))
		p.forward(w, r, body, a, &fakeband.Fault{Endpoint: ep, Nth: 1, Count: max(ev.Count, 1), Kind: fakeband.FailBefore, Status: ev.Status})
	case Latency:
		s.count("latency")
		t := time.NewTimer(ev.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		p.forward(w, r, body, a, nil)
	case StaleNext:
		s.count("stale_next")
		s.excuse(1) // claiming a processed message fails
		p.forward(w, r, body, a, &fakeband.Fault{Endpoint: ep, Nth: 1, Kind: fakeband.StaleNext})
	case ApplyLate:
		// Held whatever the agent does, then applied: the request stays
		// in flight (the system is not quiet) until it is. The next
		// event (a kill drawn with this one) may fire during the hold.
		s.advance()
		advanced = true
		s.excuse(1) // the agent may give up on it
		t := time.NewTimer(ev.Delay)
		<-t.C
		gone := l.isDead(s) || r.Context().Err() != nil
		rec := s.serve(r, body, a, nil)
		if rec.status/100 == 2 {
			if gone {
				s.count("applied_late_after_sender_gone")
			} else {
				s.count("applied_late")
			}
		}
		p.answer(w, r, rec, a) // to nobody, if the agent gave up or died
	case Pause:
		rec, ok := s.applyFor(l, r, body, a, nil)
		if !ok {
			abort(w)
			return
		}
		s.pause(l, ev.Delay)
		p.answer(w, r, rec, a) // to a holder that wakes mid-turn
	case HandOver:
		rec, ok := s.applyFor(l, r, body, a, nil)
		if !ok {
			abort(w)
			return
		}
		p.answer(w, r, rec, a)
		go s.handOver(l)
	case Interrupt, Stop:
		rec, ok := s.applyFor(l, r, body, a, nil)
		if !ok {
			abort(w)
			return
		}
		if i := s.roomIndex(room); i >= 0 {
			s.signal(ev.Kind, i, msg, true)
		}
		p.answer(w, r, rec, a)
	}
}

// forward applies the request (after injecting f, if set) and writes the
// fake's answer back.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request, body []byte, a *attempt, f *fakeband.Fault) {
	rec, ok := p.s.applyFor(p.l, r, body, a, f)
	if !ok {
		abort(w)
		return
	}
	p.answer(w, r, rec, a)
}

// answer writes the fake's answer to the agent and records whether it got
// there: the agent still waiting, its life not over.
func (p *proxy) answer(w http.ResponseWriter, r *http.Request, rec *recorded, a *attempt) {
	rec.writeTo(w)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	reached := !p.l.isDead(p.s) && r.Context().Err() == nil
	p.s.mu.Lock()
	a.Answered = reached
	p.s.mu.Unlock()
}

// abort drops the client's connection without an answer.
func abort(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = c.Close()
		return
	}
	panic(http.ErrAbortHandler) // net/http closes the connection quietly
}

// arrive records a request of life l and stamps it on the engine's clock.
func (s *sim) arrive(l *life, ep fakeband.Endpoint, room, msg string) *attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	a := &attempt{Life: l.n, Tick: s.clock, EP: ep, Room: room, Msg: msg}
	s.attempts = append(s.attempts, a)
	if s.replicas() && failoverEndpoint(ep) {
		s.speakLocked(l, a)
	}
	if ep != fakeband.EndpointSocket {
		s.inflight++
	}
	if mutating(ep) {
		s.lastSend, s.progress = time.Now(), time.Now()
		s.owed = 0
	}
	if !l.asked {
		// A process slow to start (an interpreter on a loaded machine)
		// has not stalled: the stall clock runs from its first request.
		l.asked, s.progress = true, time.Now()
	}
	return a
}

func (s *sim) leave() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
	s.poke()
}

// mutating reports whether a request changes the fake: a claim, a mark,
// a reply.
func mutating(ep fakeband.Endpoint) bool {
	switch ep {
	case fakeband.EndpointProcessing, fakeband.EndpointProcessed, fakeband.EndpointFailed, fakeband.EndpointPost:
		return true
	}
	return false
}

// applyFor applies a request of life l unless l is dead (then ok is
// false: a dead process sends nothing).
func (s *sim) applyFor(l *life, r *http.Request, body []byte, a *attempt, f *fakeband.Fault) (*recorded, bool) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if l.dead {
		return nil, false
	}
	return s.serveLocked(r, body, a, f), true
}

// serve applies a request whatever its life (a KillAfter's, after the
// kill).
func (s *sim) serve(r *http.Request, body []byte, a *attempt, f *fakeband.Fault) *recorded {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.serveLocked(r, body, a, f)
}

func (s *sim) serveLocked(r *http.Request, body []byte, a *attempt, f *fakeband.Fault) *recorded {
	if f != nil {
		s.band.Inject(*f) // counted from here: this request is its first match
	}
	req := r.Clone(context.WithoutCancel(r.Context()))
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	rec := &recorded{header: make(http.Header)}
	s.band.Handler().ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	s.mu.Lock()
	a.Status = rec.status
	if a.EP == fakeband.EndpointPost && rec.status == http.StatusCreated {
		var out struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(rec.body.Bytes(), &out) == nil {
			a.PostID = out.Data.ID
		}
	}
	s.mu.Unlock()
	return rec
}

// recorded is an answer of the fake, kept to be written later (or never).
type recorded struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorded) Header() http.Header { return r.header }

func (r *recorded) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorded) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorded) writeTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

// classify names a request's endpoint, room and message from its path.
func classify(method, path string) (ep fakeband.Endpoint, room, msg string) {
	_, rest, ok := strings.Cut(path, fakeband.APIPrefix+"/")
	if !ok {
		return "", "", ""
	}
	switch rest {
	case "socket/websocket":
		return fakeband.EndpointSocket, "", ""
	case "agent/me":
		return fakeband.EndpointMe, "", ""
	case "agent/chats":
		return fakeband.EndpointChats, "", ""
	}
	rest, ok = strings.CutPrefix(rest, "agent/chats/")
	if !ok {
		return "", "", ""
	}
	room, tail, _ := strings.Cut(rest, "/")
	switch {
	case tail == "context":
		return fakeband.EndpointContext, room, ""
	case tail == "messages" && method == http.MethodPost:
		return fakeband.EndpointPost, room, ""
	case tail == "messages/next":
		return fakeband.EndpointNext, room, ""
	}
	if m, ok := strings.CutPrefix(tail, "messages/"); ok {
		id, mark, _ := strings.Cut(m, "/")
		switch mark {
		case "processing":
			return fakeband.EndpointProcessing, room, id
		case "processed":
			return fakeband.EndpointProcessed, room, id
		case "failed":
			return fakeband.EndpointFailed, room, id
		}
	}
	return "", room, ""
}

// supersedeMark is what the engine notes when a supersede push passes.
const supersedeMark = "supersede"

// watchedSocket is the fake's end of a socket tunnel: it notes every
// control push's correlation id, and the supersede push, as they pass to
// the agent. Server frames are neither masked nor compressed, so the
// bytes can be scanned as they are.
type watchedSocket struct {
	rwc    io.ReadWriteCloser
	l      *life
	closed atomic.Bool
	joined atomic.Bool // the fake answered its join of the control topic
	carry  []byte      // the end of the last read, in case a mark spans two
}

var (
	correlationField = []byte(`"correlation_id":"`)
	supersedeEvent   = []byte(`,"supersede",`)
	controlTopic     = []byte(`"agent_control:`)
	joinReply        = []byte(`","phx_reply",`)
)

// maxMark bounds what the scan carries over between reads.
const maxMark = 64

func (c *watchedSocket) Read(p []byte) (int, error) {
	n, err := c.rwc.Read(p)
	if n > 0 {
		c.scan(p[:n])
	}
	if err != nil {
		c.markClosed()
	}
	return n, err
}

func (c *watchedSocket) scan(read []byte) {
	data := append(c.carry, read...)
	if bytes.Contains(data, supersedeEvent) {
		c.l.notePush(supersedeMark)
	}
	if !c.joined.Load() {
		for rest := data; ; {
			i := bytes.Index(rest, controlTopic)
			if i < 0 {
				break
			}
			rest = rest[i+len(controlTopic):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.HasPrefix(rest[j:], joinReply) {
				c.joined.Store(true)
				break
			}
		}
	}
	rest := data
	for {
		i := bytes.Index(rest, correlationField)
		if i < 0 {
			break
		}
		tail := rest[i+len(correlationField):]
		j := bytes.IndexByte(tail, '"')
		if j < 0 {
			break // the id goes on in the next read
		}
		c.l.notePush(string(tail[:j]))
		rest = tail[j:]
	}
	keep := min(len(data), maxMark)
	c.carry = append(c.carry[:0], data[len(data)-keep:]...)
}

func (c *watchedSocket) Write(p []byte) (int, error) { return c.rwc.Write(p) }

func (c *watchedSocket) Close() error {
	c.markClosed()
	return c.rwc.Close()
}

func (c *watchedSocket) markClosed() {
	if c.closed.CompareAndSwap(false, true) {
		c.l.socketsOpen.Add(-1)
	}
}
