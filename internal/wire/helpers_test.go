package wire

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/band-once/bandonce/internal/memnet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testBase = "http://band.test/api/v1"
	testKey  = "band_a_test_key"
)

// hit is one request as the stub server saw it.
type hit struct {
	Method string
	Path   string // escaped, as on the wire
	Query  string
	Header http.Header
	Body   string
	At     time.Time // virtual time under synctest
}

// answer is what the stub says to one request.
type answer struct {
	status int
	header map[string]string
	body   string
}

// stub is a tiny Band: it records every request and answers from a
// script indexed by the request's position.
type stub struct {
	mu     sync.Mutex
	hits   []hit
	script func(n int, r *http.Request) answer
}

func newStub(script func(n int, r *http.Request) answer) *stub {
	return &stub{script: script}
}

// sequence answers request n with as[n], repeating the last one.
func sequence(as ...answer) func(int, *http.Request) answer {
	return func(n int, _ *http.Request) answer { return as[min(n, len(as)-1)] }
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.hits)
	s.hits = append(s.hits, hit{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: string(body), At: time.Now()})
	s.mu.Unlock()
	a := s.script(n, r)
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (s *stub) requests() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

// gaps returns the time between consecutive requests.
func (s *stub) gaps() []time.Duration {
	hs := s.requests()
	var out []time.Duration
	for i := 1; i < len(hs); i++ {
		out = append(out, hs[i].At.Sub(hs[i-1].At))
	}
	return out
}

// client returns a Client talking to s in memory through a retry Doer.
func (s *stub) client(o RetryOptions) *Client {
	return NewClient(testBase, testKey, NewRetryDoer(memnet.Client(s), o))
}

// once sends every request exactly once.
var once = RetryOptions{MaxAttempts: 1}

// errConnReset stands in for a connection that broke mid-request.
var errConnReset = errors.New("connection reset by peer")

// flaky fails the first n round trips with errConnReset, then passes the
// rest to next.
type flaky struct {
	next  http.RoundTripper
	fails int64
	tries atomic.Int64
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.tries.Add(1) <= f.fails {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errConnReset
	}
	return f.next.RoundTrip(req)
}

// ok wraps data in the success envelope.
func ok(status int, body string) answer { return answer{status: status, body: body} }

const (
	messageJSON = `{"id":"m1","content":"hello @[[a1]]","message_type":"text","sender_id":"u1","sender_type":"User","sender_name":"Ann","chat_room_id":"c1","inserted_at":"2026-06-13T10:00:00Z","metadata":{"mentions":[{"id":"a1"}]}}`
	markJSON    = `{"data":{"id":"m1","status":"processing","attempt_number":1,"success":true}}`
	agentJSON   = `{"data":{"id":"a1","name":"Bot","handle":"ann/bot","owner_uuid":"u1","inserted_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}`
)
