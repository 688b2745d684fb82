package proof

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// errSevered is what every request of a killed life gets.
var errSevered = errors.New("proof: connection severed (the agent was killed)")

// gate holds every request of the agent until the driver releases it, so
// the driver alone decides the order in which requests reach the fake
// and which fault each one meets. Requests park in RoundTrip; the driver
// picks one with pick and hands it a verdict.
type gate struct {
	inner   http.RoundTripper // the fake's in-memory transport, for upgrades
	handler http.Handler      // the fake's handler, for everything else
	stamp   func() int        // the fake's current event sequence number
	order   *orderClock
	fired   firedCounts

	mu       sync.Mutex
	arrivals int
	parked   []*parkedRequest
	sends    []*sendRecord
	turnReqs []*roomRequest
	wake     chan struct{} // capacity 1: a request parked
	holding  int           // requests an ApplyLate holds, not applied yet
	// reps judges the requests of replicas; ledger holds their parked
	// calls to the shared ledger. Both only with replicas.
	reps   *replicaState
	ledger []*ledgerCall
}

type verdict int

const (
	release verdict = iota
	sever
)

// parkedRequest is one request waiting at the gate.
type parkedRequest struct {
	arrival int
	life    *life
	req     *http.Request
	ep      fakeband.Endpoint
	room    string
	order   string // method and path: what the driver sorts by
	verdict chan verdict
	send    *sendRecord   // replies (POST .../messages) only
	turnReq *roomRequest  // requests of a turn only (see roomRequest)
	tick    int64         // orderClock when it parked
	answer  answerFault   // set by the driver before release
	late    time.Duration // ApplyLate: hold this long, then apply whatever the sender did
	// delay is latency on the way to the fake, set by the driver before
	// release. A request still travelling when its life is killed never
	// arrives, so no request of a dead life lands after the next life
	// started.
	delay time.Duration
}

// sendRecord is one reply POST that left the agent, stamped with the
// fake's event sequence when it was sent (parked), released and answered.
type sendRecord struct {
	Life               int
	Room, Key          string
	Parked, Start, End int
	Released, Answered bool
	ParkedTick         int64 // orderClock when it parked
}

func newGate(inner http.RoundTripper, handler http.Handler, stamp func() int, order *orderClock) *gate {
	return &gate{inner: inner, handler: handler, stamp: stamp, order: order, wake: make(chan struct{}, 1)}
}

// send delivers a released request to the fake.
func (g *gate) send(req *http.Request) (*http.Response, error) {
	if isUpgrade(req) {
		return g.inner.RoundTrip(req)
	}
	return serveInline(g.handler, req)
}

// transport is the RoundTripper one life's HTTPClient uses.
type transport struct {
	g *gate
	l *life
}

func (t *transport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	p, err := t.g.park(t.l, req)
	if err != nil {
		return nil, err
	}
	defer func() { t.g.noteAnswer(p, resp, err) }()
	var v verdict
	select {
	case v = <-p.verdict:
	case <-req.Context().Done():
		if t.g.unpark(p) {
			return nil, context.Cause(req.Context())
		}
		v = <-p.verdict // decided just now; honour it
	}
	if v == sever {
		return nil, errSevered
	}
	return t.deliver(req, p)
}

// deliver takes a released request to the fake and its answer back.
func (t *transport) deliver(req *http.Request, p *parkedRequest) (*http.Response, error) {
	if p.delay > 0 {
		timer := time.NewTimer(p.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-req.Context().Done():
			return nil, context.Cause(req.Context())
		case <-t.l.dead:
			return nil, errSevered
		}
	}
	if p.late > 0 {
		return t.deliverLate(req, p)
	}
	resp, err := t.g.forward(t.l, p)
	if err != nil || (p.answer == answerFault{}) {
		return resp, err
	}
	return t.g.answer(t.l, p, resp)
}

// park records req and queues it for the driver, unless its life is
// already dead.
func (g *gate) park(l *life, req *http.Request) (*parkedRequest, error) {
	ep, room := classify(req.Method, req.URL.Path)
	p := &parkedRequest{life: l, req: req, ep: ep, room: room, order: req.Method + " " + req.URL.Path, verdict: make(chan verdict, 1)}
	switch ep {
	case fakeband.EndpointPost:
		key, err := replyKey(req)
		if err != nil {
			return nil, err
		}
		parked := g.stamp()
		if left, ok := req.Context().Value(leftAtKey{}).(int); ok && left < parked {
			parked = left // made before its life's pause, held until it woke
		}
		p.send = &sendRecord{Life: l.n, Room: room, Key: key, Parked: parked}
	}
	switch ep {
	case fakeband.EndpointNext, fakeband.EndpointProcessing, fakeband.EndpointProcessed, fakeband.EndpointFailed, fakeband.EndpointPost, fakeband.EndpointContext:
		p.turnReq = &roomRequest{Life: l.n, Kind: ep, Room: room, Message: markMessage(req.URL.Path)}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if l.severed {
		return nil, errSevered
	}
	g.arrivals++
	p.arrival = g.arrivals
	if g.reps != nil {
		g.reps.sent(l, p)
	}
	if ep == fakeband.EndpointSocket {
		l.sockets.Add(1)
	}
	p.tick = g.order.next()
	g.parked = append(g.parked, p)
	if p.send != nil {
		p.send.ParkedTick = p.tick
		g.sends = append(g.sends, p.send)
	}
	if p.turnReq != nil {
		p.turnReq.Parked = p.tick
		g.turnReqs = append(g.turnReqs, p.turnReq)
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return p, nil
}

// unpark withdraws a request whose caller gave up; false if the driver
// already decided it.
func (g *gate) unpark(p *parkedRequest) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.parked, p)
	if i < 0 {
		return false
	}
	g.parked = slices.Delete(g.parked, i, i+1)
	return true
}

// pick removes and returns the parked request that sorts first by method
// and path (then arrival), or nil. Requests of different goroutines differ
// in path, so the order does not depend on scheduling.
func (g *gate) pick() *parkedRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.parked) == 0 {
		return nil
	}
	best := 0
	for i, p := range g.parked[1:] {
		q := g.parked[best]
		if c := cmp.Compare(p.order, q.order); c < 0 || (c == 0 && p.arrival < q.arrival) {
			best = i + 1
		}
	}
	p := g.parked[best]
	g.parked = slices.Delete(g.parked, best, best+1)
	return p
}

func (g *gate) idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.parked) == 0
}

// inFlightSends returns the reply POSTs of room (every room when "") that
// have left the agent and not been answered.
func (g *gate) inFlightSends(room string) []*sendRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*sendRecord
	for _, s := range g.sends {
		if !s.Answered && (room == "" || s.Room == room) {
			out = append(out, s)
		}
	}
	return out
}

// sever kills l's connections: every parked request fails, and so does
// every later one.
func (g *gate) sever(l *life) {
	g.mu.Lock()
	if !l.severed {
		close(l.dead)
	}
	l.severed = true
	var doomed []*parkedRequest
	g.parked = slices.DeleteFunc(g.parked, func(p *parkedRequest) bool {
		if p.life == l {
			doomed = append(doomed, p)
			return true
		}
		return false
	})
	var calls []*ledgerCall
	g.ledger = slices.DeleteFunc(g.ledger, func(c *ledgerCall) bool {
		if c.life == l {
			calls = append(calls, c)
			return true
		}
		return false
	})
	g.mu.Unlock()
	for _, p := range doomed {
		p.verdict <- sever
	}
	for _, c := range calls {
		c.verdict <- ledgerSevered
	}
}

func (g *gate) isSevered(l *life) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return l.severed
}

// forward sends a released request to the fake and returns its answer,
// unless the life died meanwhile.
func (g *gate) forward(l *life, p *parkedRequest) (*http.Response, error) {
	if claimsWork(p.ep) && p.req.Context().Err() == nil {
		l.noteWorkAfterSupersede(p.ep, p.tick)
	}
	g.began(p)
	resp, err := g.send(p.req)
	g.answered(p)
	if g.isSevered(l) {
		if err == nil {
			resp.Body.Close()
		}
		return nil, errSevered
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			l.socketsOpen.Add(1)
			resp.Body = &socketConn{rwc: rwc, l: l}
		}
	}
	return resp, nil
}

func (g *gate) began(p *parkedRequest) {
	if p.send == nil {
		return
	}
	seq := g.stamp()
	g.mu.Lock()
	p.send.Released, p.send.Start = true, seq
	g.mu.Unlock()
}

func (g *gate) answered(p *parkedRequest) {
	if p.send == nil {
		return
	}
	seq := g.stamp()
	g.mu.Lock()
	p.send.Answered, p.send.End = true, seq
	g.mu.Unlock()
}

// noteAnswer records, for a request of a turn, when the agent had its
// answer (or gave up on it) and whether it was a 2xx.
func (g *gate) noteAnswer(p *parkedRequest, resp *http.Response, err error) {
	if p.turnReq == nil {
		return
	}
	tick := g.order.next()
	g.mu.Lock()
	defer g.mu.Unlock()
	p.turnReq.Answered, p.turnReq.OK = tick, err == nil && resp.StatusCode/100 == 2
}

func (g *gate) turnRequests() []roomRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]roomRequest, len(g.turnReqs))
	for i, m := range g.turnReqs {
		out[i] = *m
	}
	return out
}

func (g *gate) sendRecords() []sendRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]sendRecord, len(g.sends))
	for i, s := range g.sends {
		out[i] = *s
	}
	return out
}

// deliverLate carries out ApplyLate: the request, detached from its
// sender, is held p.late and then applied, whether or not the sender
// still waits; a sender that does gets the answer. The hold is in
// virtual time and ends by itself, and the schedule is not quiet until
// it has (see holds).
func (t *transport) deliverLate(req *http.Request, p *parkedRequest) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	held := *p
	held.req = req.Clone(context.WithoutCancel(req.Context()))
	held.req.Body = io.NopCloser(bytes.NewReader(body))
	t.g.mu.Lock()
	t.g.holding++
	t.g.mu.Unlock()
	answered := make(chan lateAnswer, 1)
	go func() {
		time.Sleep(p.late)
		// The sender may have given up or died meanwhile: forward then
		// applies the request all the same and answers nobody.
		gone := req.Context().Err() != nil || t.g.isSevered(t.l)
		resp, err := t.g.forward(t.l, &held)
		if err == nil && resp.StatusCode/100 == 2 {
			if gone {
				t.g.fired.add("applied_late_after_sender_gone")
			} else {
				t.g.fired.add("applied_late")
			}
		}
		t.g.mu.Lock()
		t.g.holding--
		t.g.mu.Unlock()
		answered <- lateAnswer{resp, err}
	}()
	select {
	case a := <-answered:
		return a.resp, a.err
	case <-req.Context().Done():
		go drainLate(answered)
		return nil, context.Cause(req.Context())
	case <-t.l.dead:
		go drainLate(answered)
		return nil, errSevered
	}
}

// lateAnswer is what a held request's application returned.
type lateAnswer struct {
	resp *http.Response
	err  error
}

// drainLate closes the answer of a held request nobody waits for.
func drainLate(answered <-chan lateAnswer) {
	if a := <-answered; a.err == nil && a.resp != nil {
		drain(a.resp)
	}
}

// holds reports whether an ApplyLate still holds a request the fake has
// not applied yet.
func (g *gate) holds() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding > 0
}
