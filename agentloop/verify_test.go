package agentloop_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/verify"
)

// renumbering is a model that asks for a thought and a refund, then
// answers, giving its tool calls new ids at every call, as real models
// do. Its words are the same at every call: with the verifier's memory
// ledger a crash loses the record, and a model that reworded its answer
// would post another text under the same key.
type renumbering struct {
	mu sync.Mutex
	n  int
}

func (r *renumbering) Complete(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	if err := ctx.Err(); err != nil {
		return agentloop.Response{}, err
	}
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	if len(req.Turns) > 1 {
		return agentloop.Response{Text: "Refunded."}, nil
	}
	return agentloop.Response{ToolCalls: []agentloop.ToolCall{
		{ID: fmt.Sprintf("toolu_%d_a", n), Name: agentloop.ToolSendEvent, Arguments: []byte(`{"type":"thought","content":"I will refund it."}`)},
		{ID: fmt.Sprintf("toolu_%d_b", n), Name: "refund", Arguments: []byte(`{"order":"order-17"}`)},
	}}, nil
}

// refundTool refunds through the verifier's external double, once per
// idempotency key; the unit of work is the message.
func refundTool() agentloop.Tool {
	return agentloop.Tool{
		Name: "refund", Description: "Refund an order.",
		Schema: []byte(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`),
		Run: func(ctx context.Context, c agentloop.Call) (string, error) {
			if err := verify.ExternalFrom(ctx).EffectOnce(ctx, c.IdempotencyKey, "refund:"+c.Msg.ID); err != nil {
				return "", err
			}
			return "refunded", nil
		},
	}
}

// The loop keeps exactly-once under every check of the verifier, with a
// model that renumbers its tool calls at every response.
func TestTheLoopIsExactlyOnceUnderTheVerifier(t *testing.T) {
	loop := &agentloop.Loop{Model: &renumbering{}, Tools: append(agentloop.BandTools(), refundTool())}
	res := verify.ExactlyOnce(t, verify.Shell(loop.Handler()))
	t.Logf("%d schedules", res.Schedules)
}

// naiveLoop is the loop written by hand the way it goes wrong: each tool
// call is a Step named after the model's id for it.
func naiveLoop(model agentloop.Model, tool agentloop.Tool) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		turns := []agentloop.Turn{{Role: agentloop.RoleUser, Text: m.Body()}}
		for {
			resp, err := model.Complete(ctx, agentloop.Request{Turns: turns})
			if err != nil {
				return nil, err
			}
			turns = append(turns, agentloop.Turn{Role: agentloop.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
			if len(resp.ToolCalls) == 0 {
				return &bandonce.Reply{Content: resp.Text, Mentions: []string{m.SenderID}}, nil
			}
			for _, tc := range resp.ToolCalls {
				if tc.Name != tool.Name {
					turns = append(turns, agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: tc.ID, Text: "skipped"})
					continue
				}
				out, err := m.Step(ctx, "tool:"+tc.ID, func(ctx context.Context, idem string) ([]byte, error) {
					s, err := tool.Run(ctx, agentloop.Call{Msg: m, Arguments: tc.Arguments, Key: tc.ID, IdempotencyKey: idem})
					return []byte(s), err
				})
				if err != nil {
					return nil, err
				}
				turns = append(turns, agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: tc.ID, Text: string(out)})
			}
		}
	}
}

// The verifier fails a hand-written loop whose tool keys come from the
// model's tool-call ids, and names the defect: one refund under two keys.
func TestTheVerifierFailsALoopKeyedByTheModelsIDs(t *testing.T) {
	m := &recorder{TB: t, t: t}
	res := verify.ExactlyOnce(m, verify.Shell(naiveLoop(&renumbering{}, refundTool())))
	if res.OK {
		t.Fatal("the verifier passed a loop keyed by the model's tool-call ids")
	}
	t.Logf("check %s, seed %d: %s", res.Check, res.FirstViolatingSeed, res.Reason)
	if !containsAny(res.Reason, "idempotency key", "not stable") {
		t.Errorf("the reason %q does not name the unstable key", res.Reason)
	}
}
