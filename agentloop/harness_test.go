package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/fakeband"
)

// world is a fake Band with one agent and a room of two humans.
type world struct {
	fb       *fakeband.Band
	agent    fakeband.Agent
	ada, bea fakeband.Human
	room     fakeband.Room
	ledger   bandonce.Ledger
}

func newWorld(t *testing.T) *world {
	t.Helper()
	fb := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { fb.Close() })
	w := &world{fb: fb, agent: fb.AddAgent("assistant"), ledger: bandonce.NewMemoryLedger()}
	w.ada, w.bea = fb.AddHuman("ada"), fb.AddHuman("bea")
	w.room = fb.AddRoom("support", w.ada, w.agent.ID, w.bea.ID)
	return w
}

// serve runs a shell with h until the test ends.
func (w *world) serve(t *testing.T, h bandonce.Handler) {
	t.Helper()
	sh, err := bandonce.New(bandonce.Config{
		APIKey: w.agent.Key, BaseURL: w.fb.BaseURL(), SocketURL: w.fb.SocketURL(), HTTPClient: w.fb.HTTPClient(),
		Handler: h, Ledger: w.ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The fake applies nothing late: a write whose answer was lost
		// has settled as soon as it was made. Real time, so not 60 s.
		SettleWindow: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shell: %v", err)
		}
	})
}

// say posts text from ada to the agent and returns the message id.
func (w *world) say(t *testing.T, text string) string {
	t.Helper()
	id, err := w.fb.Say(w.room.ID, w.ada.ID, text, w.agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitStatus waits until the message reaches status.
func (w *world) waitStatus(t *testing.T, msg, status string) {
	t.Helper()
	eventually(t, "message "+status, func() bool { return w.fb.Status(w.agent.ID, msg) == status })
}

// eventually waits for cond, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// agentPosts returns the contents (marker line cut) of the agent's posts.
func (w *world) agentPosts() []string {
	var out []string
	for _, p := range w.fb.Posts(w.room.ID) {
		if p.SenderID == w.agent.ID {
			first, _, _ := strings.Cut(p.Content, "\n")
			out = append(out, bandonce.StripMentions(first))
		}
	}
	return out
}

// script is a model that answers the n-th call of a turn (counted by the
// assistant entries of its conversation) with steps[n-1], numbering its
// tool calls afresh at every response, as real models do, and wording
// every final answer differently.
type script struct {
	steps []agentloop.Response

	mu    sync.Mutex
	calls int         // Complete calls made
	byPos map[int]int // Complete calls per position
	seen  []agentloop.Request
}

func (s *script) Complete(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	if err := ctx.Err(); err != nil {
		return agentloop.Response{}, err
	}
	pos := 0
	for _, t := range req.Turns {
		if t.Role == agentloop.RoleAssistant {
			pos++
		}
	}
	s.mu.Lock()
	s.calls++
	n := s.calls
	if s.byPos == nil {
		s.byPos = map[int]int{}
	}
	s.byPos[pos+1]++
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	if pos >= len(s.steps) {
		return agentloop.Response{}, fmt.Errorf("script: no step %d", pos+1)
	}
	resp := s.steps[pos]
	resp.ToolCalls = append([]agentloop.ToolCall(nil), resp.ToolCalls...)
	for i := range resp.ToolCalls {
		resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n, i)
	}
	if len(resp.ToolCalls) == 0 {
		resp.Text = fmt.Sprintf("%s (worded #%d)", resp.Text, n)
	}
	return resp, nil
}

func (s *script) counts() (int, map[int]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[int]int{}
	for k, v := range s.byPos {
		m[k] = v
	}
	return s.calls, m
}

func call(name, args string) agentloop.ToolCall {
	return agentloop.ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

// effects counts a tool's runs and the keys it was given.
type effects struct {
	mu   sync.Mutex
	runs map[string]int // by Call.Key
	idem map[string]string
}

func (e *effects) tool(name string) agentloop.Tool {
	return agentloop.Tool{
		Name: name, Description: "does " + name,
		Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
		Run: func(ctx context.Context, c agentloop.Call) (string, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.runs == nil {
				e.runs, e.idem = map[string]int{}, map[string]string{}
			}
			e.runs[c.Key]++
			e.idem[c.Key] = c.IdempotencyKey
			return name + " done", nil
		},
	}
}

func (e *effects) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int{}
	for k, v := range e.runs {
		m[k] = v
	}
	return m
}
