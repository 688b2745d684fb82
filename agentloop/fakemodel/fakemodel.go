// Package fakemodel is a fake language-model API for tests and examples:
// the Anthropic Messages API (POST /v1/messages) and the OpenAI Chat
// Completions API (POST /v1/chat/completions), answering from a script,
// with faults on demand (429 with Retry-After, 5xx, slow answers). It
// listens on the loopback interface only and never calls a real API.
//
// The script answers by the turn's position, not by the order of the
// requests: a request whose conversation holds n answers of the model
// gets Steps[n]. A turn replayed after a crash, or retried after a fault,
// asks for the same step and gets the same answer, with tool-call ids
// that are new at every request, as a real model's are.
package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/band-once/bandonce/agentloop"
)

// MaxRequestBytes bounds a request body the server reads.
const MaxRequestBytes = 8 << 20

// Fault is what the server does to one request instead of answering it.
type Fault struct {
	// Status, when not 0, is the error status to answer with (429, 500,
	// 529 ...).
	Status int
	// RetryAfter, with Status, is sent as Retry-After (whole seconds,
	// rounded up) and retry-after-ms.
	RetryAfter time.Duration
	// Delay holds the answer back this long (or until the client gives
	// up), then answers as the rest of the Fault says.
	Delay time.Duration
}

// Server is a fake model API on 127.0.0.1.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:port".
	URL string

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	steps    []agentloop.Response
	faults   []Fault
	requests []agentloop.Request
	byStep   map[int]int
	n        int
	stopped  chan struct{}
	conns    sync.WaitGroup // open connections, to wait for at Close
}

// New starts a server answering with steps.
func New(steps ...agentloop.Response) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, steps: steps, byStep: map[int]int{}, stopped: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.serve(anthropicWire{}))
	mux.HandleFunc("POST /v1/chat/completions", s.serve(openaiWire{}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.conns.Done()
		}
	}}
	go func() {
		defer close(s.stopped)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the server and waits for its goroutines, those of its
// connections too.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.stopped
	s.conns.Wait()
	return err
}

// Inject queues faults: each is applied to one request, in order.
func (s *Server) Inject(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// Requests returns every request received, decoded, faulted ones too.
func (s *Server) Requests() []agentloop.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agentloop.Request(nil), s.requests...)
}

// Answered returns how many times each step (counted from 1) was
// answered.
func (s *Server) Answered() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int]int, len(s.byStep))
	for k, v := range s.byStep {
		m[k] = v
	}
	return m
}

// wire is one provider's format.
type wire interface {
	decode(body []byte) (agentloop.Request, error)
	encode(resp agentloop.Response, id string) any
	errorBody(status int, msg string) any
}

func (s *Server) serve(w wire) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxRequestBytes))
		if err != nil {
			writeJSON(rw, http.StatusRequestEntityTooLarge, w.errorBody(413, "request body: "+err.Error()))
			return
		}
		req, err := w.decode(body)
		if err != nil {
			writeJSON(rw, http.StatusBadRequest, w.errorBody(400, err.Error()))
			return
		}
		pos := 0
		for _, t := range req.Turns {
			if t.Role == agentloop.RoleAssistant {
				pos++
			}
		}
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.n++
		id := strconv.Itoa(s.n)
		var f Fault
		if len(s.faults) > 0 {
			f, s.faults = s.faults[0], s.faults[1:]
		}
		s.mu.Unlock()
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if f.Status != 0 {
			if f.RetryAfter > 0 {
				rw.Header().Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
				rw.Header().Set("retry-after-ms", strconv.FormatInt(f.RetryAfter.Milliseconds(), 10))
			}
			writeJSON(rw, f.Status, w.errorBody(f.Status, "injected fault"))
			return
		}
		if pos >= len(s.steps) {
			writeJSON(rw, http.StatusBadRequest, w.errorBody(400, fmt.Sprintf("the script has no step %d", pos+1)))
			return
		}
		resp := s.steps[pos]
		resp.ToolCalls = append([]agentloop.ToolCall(nil), resp.ToolCalls...)
		for i := range resp.ToolCalls {
			resp.ToolCalls[i].ID = "call_" + id + "_" + strconv.Itoa(i)
			if len(resp.ToolCalls[i].Arguments) == 0 {
				resp.ToolCalls[i].Arguments = json.RawMessage("{}")
			}
		}
		s.mu.Lock()
		s.byStep[pos+1]++
		s.mu.Unlock()
		writeJSON(rw, http.StatusOK, w.encode(resp, id))
	}
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

var errNoMessages = errors.New("no messages")

// Client is a plain HTTP client of the server's Anthropic wire, for
// examples that must not link an SDK: a Model that posts to /v1/messages.
type Client struct {
	BaseURL    string
	HTTPClient *http.Client
}

// Complete makes one model call.
func (c *Client) Complete(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	body, err := json.Marshal(anthropicWire{}.request(req))
	if err != nil {
		return agentloop.Response{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/messages", bytesReader(body))
	if err != nil {
		return agentloop.Response{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(hr)
	if err != nil {
		return agentloop.Response{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxRequestBytes+1))
	if err != nil {
		return agentloop.Response{}, err
	}
	if len(raw) > MaxRequestBytes {
		return agentloop.Response{}, fmt.Errorf("fakemodel: response larger than %d bytes", MaxRequestBytes)
	}
	if res.StatusCode != http.StatusOK {
		return agentloop.Response{}, fmt.Errorf("fakemodel: %s: %s", res.Status, raw)
	}
	return anthropicWire{}.decodeResponse(raw)
}
