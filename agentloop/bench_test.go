package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/fakeband"
)

// countingLedger counts a ledger's writes.
type countingLedger struct {
	bandonce.Ledger
	writes atomic.Int64
}

func (l *countingLedger) SetKey(ctx context.Context, room, key string, s bandonce.KeyState) error {
	l.writes.Add(1)
	return l.Ledger.SetKey(ctx, room, key, s)
}

func (l *countingLedger) SetStep(ctx context.Context, room, msg, name string, result []byte) error {
	l.writes.Add(1)
	return l.Ledger.SetStep(ctx, room, msg, name, result)
}

func (l *countingLedger) SetAckPending(ctx context.Context, room, msg string, pending bool) error {
	l.writes.Add(1)
	return l.Ledger.SetAckPending(ctx, room, msg, pending)
}

// benchModel answers at once: calls-1 responses of tools tool calls
// each, then a final answer.
func benchModel(calls, tools int) agentloop.Model {
	args := json.RawMessage(`{"x":"y"}`)
	return agentloop.ModelFunc(func(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
		pos := 0
		for _, t := range req.Turns {
			if t.Role == agentloop.RoleAssistant {
				pos++
			}
		}
		if pos+1 >= calls {
			return agentloop.Response{Text: "done"}, nil
		}
		resp := agentloop.Response{ToolCalls: make([]agentloop.ToolCall, tools)}
		for i := range resp.ToolCalls {
			resp.ToolCalls[i] = agentloop.ToolCall{ID: fmt.Sprintf("call_%d_%d", pos, i), Name: "noop", Arguments: args}
		}
		return resp, nil
	})
}

var noop = agentloop.Tool{Name: "noop", Description: "does nothing", Schema: json.RawMessage(`{"type":"object"}`),
	Run: func(context.Context, agentloop.Call) (string, error) { return "ok", nil }}

// bareHandler is the loop written by hand with nothing journaled: the
// same model calls and tool runs, the same conversation, no Step.
func bareHandler(model agentloop.Model) bandonce.Handler {
	specs := []agentloop.ToolSpec{noop.Spec()}
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		conv := []agentloop.Turn{{Role: agentloop.RoleUser, Text: m.Body()}}
		for {
			resp, err := model.Complete(ctx, agentloop.Request{Turns: conv, Tools: specs, MaxTokens: agentloop.DefaultMaxTokens})
			if err != nil {
				return nil, err
			}
			conv = append(conv, agentloop.Turn{Role: agentloop.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
			if len(resp.ToolCalls) == 0 {
				return &bandonce.Reply{Content: resp.Text, Mentions: []string{m.SenderID}}, nil
			}
			for _, tc := range resp.ToolCalls {
				out, err := noop.Run(ctx, agentloop.Call{Msg: m, Arguments: tc.Arguments})
				if err != nil {
					return nil, err
				}
				conv = append(conv, agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: tc.ID, Text: out})
			}
		}
	}
}

// BenchmarkLoop carries b.N first deliveries of a turn of `calls` model
// calls (the first calls-1 asking for `tools` tool calls each) through
// the in-memory fake Band, on a MemoryLedger, by the loop and by the same
// loop written by hand with nothing journaled (bare), with a model that
// answers at once. The difference is the loop's own cost: per message
// its ns/op, B/op and allocs/op, its round trips to Band and its ledger
// writes.
func BenchmarkLoop(b *testing.B) {
	for _, c := range []struct{ calls, tools int }{{2, 1}, {5, 1}, {5, 4}} {
		for _, kind := range []string{"bare", "loop"} {
			b.Run(fmt.Sprintf("%s/calls=%d/tools=%d", kind, c.calls, c.tools), func(b *testing.B) {
				model := benchModel(c.calls, c.tools)
				h := bareHandler(model)
				if kind == "loop" {
					h = (&agentloop.Loop{Model: model, Tools: []agentloop.Tool{noop}}).Handler()
				}
				benchMessages(b, h)
			})
		}
	}
}

// benchMessages serves b.N messages with h and reports, per message, the
// round trips to Band (start-up and empty polls left out) and the ledger
// writes.
func benchMessages(b *testing.B, h bandonce.Handler) {
	fb := fakeband.New(fakeband.Options{Seed: 1})
	defer fb.Close()
	agent, human := fb.AddAgent("bench"), fb.AddHuman("ada")
	room := fb.AddRoom("bench", human, agent.ID)
	for i := range b.N {
		if _, err := fb.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
			b.Fatal(err)
		}
	}
	ledger := &countingLedger{Ledger: bandonce.NewMemoryLedger()}
	done := make(chan struct{})
	var ended atomic.Int64
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), Handler: h, Ledger: ledger,
		DisableSocket: true, PollInterval: time.Hour, Logger: slog.New(slog.DiscardHandler),
		Hooks: bandonce.Hooks{Outcome: func(bandonce.Outcome) {
			if ended.Add(1) == int64(b.N) {
				close(done)
			}
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	before := fb.Requests()
	ctx, cancel := context.WithCancel(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	ran := make(chan error, 1)
	go func() { ran <- shell.Run(ctx) }()
	<-done
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	trips := b.N // one /next per message served
	for ep, n := range fb.Requests() {
		switch ep {
		case fakeband.EndpointMe, fakeband.EndpointChats, fakeband.EndpointSocket, fakeband.EndpointNext:
		default:
			trips += n - before[ep]
		}
	}
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/msg")
	b.ReportMetric(float64(ledger.writes.Load())/float64(b.N), "ledger-writes/msg")
}
