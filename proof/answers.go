package proof

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// orderClock numbers what the engine sees happen (requests parked and
// answered, pushes read, handler starts) in one total order. The fake's
// event sequence cannot order them: several can fall between two of its
// events, and a verdict that hangs on "before or after" needs them apart.
type orderClock struct{ n atomic.Int64 }

func (c *orderClock) next() int64 { return c.n.Add(1) }

// answerFault is how the gate answers a request the fake applied:
// status, if set, replaces the fake's answer (AppliedThen5xx); delay, if
// set, holds the answer back (AnswerAfterGiveUp).
type answerFault struct {
	status int
	delay  time.Duration
}

// roomRequest is one request about a room that left the agent (/next, a
// mark, a read of the room's context, a reply): which life sent it, in
// which room and for which message (marks), when it parked, and when the
// agent had its answer, and whether that was a 2xx.
type roomRequest struct {
	Life          int
	Kind          fakeband.Endpoint
	Room, Message string
	Parked        int64 // orderClock
	Answered      int64 // orderClock; 0 while the agent waits
	OK            bool  // the agent was answered 2xx
}

// firedCounts counts faults the agent's goroutines fire, for the receipt.
type firedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *firedCounts) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[name]++
}

func (f *firedCounts) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.n))
	for k, v := range f.n {
		out[k] = v
	}
	return out
}

// answer applies the request's answer fault to the fake's response.
func (g *gate) answer(l *life, p *parkedRequest, resp *http.Response) (*http.Response, error) {
	applied := resp.StatusCode/100 == 2
	switch {
	case p.answer.status != 0:
		drain(resp)
		if applied {
			g.fired.add("applied_then_5xx")
		}
		return balancerAnswer(p.req, p.answer.status), nil
	case p.answer.delay > 0:
		timer := time.NewTimer(p.answer.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
			if applied {
				g.fired.add("applied_answered_late")
			}
			return resp, nil
		case <-p.req.Context().Done():
			drain(resp)
			if applied {
				g.fired.add("applied_answered_after_give_up")
			}
			return nil, context.Cause(p.req.Context())
		case <-l.dead:
			drain(resp)
			return nil, errSevered
		}
	}
	return resp, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// balancerAnswer is what a load balancer in front of Band answers when it
// gave up on its upstream: the status and a page of HTML, not Band's JSON.
func balancerAnswer(req *http.Request, status int) *http.Response {
	text := http.StatusText(status)
	body := "<html><body><h1>" + strconv.Itoa(status) + " " + text + "</h1></body></html>\n"
	h := http.Header{}
	h.Set("Content-Type", "text/html")
	return &http.Response{
		Status: strconv.Itoa(status) + " " + text, StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// markMessage is the message id in a mark's path, or "".
func markMessage(path string) string {
	_, rest, ok := strings.Cut(path, "/messages/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// claimsWork reports whether a request starts new output at Band: a
// post (a reply, or a message a handler sends while it runs), an event,
// or a socket that fights for the agent's connection. (A handler started
// is new work too; the oracle judges those from the starts.)
// Marks only end work already decided, claims included: a dead letter
// opens an attempt just to mark it processed.
func claimsWork(ep fakeband.Endpoint) bool {
	switch ep {
	case fakeband.EndpointPost, fakeband.EndpointEvent, fakeband.EndpointSocket:
		return true
	}
	return false
}
