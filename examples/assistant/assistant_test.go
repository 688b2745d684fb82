package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// -fake plays the scripted request through the Anthropic SDK and prints
// the room: the thought, the answer, the board, the memory, one refund
// and each model call made once.
func TestFakeModePrintsTheTurn(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runFake(t.Context(), &out, slog.New(slog.DiscardHandler)))
	text := out.String()
	for _, want := range []string{"[thought] ada asks for a refund of order-17", "@ada I refunded order-17 in full (42.00 EUR).",
		"board:     #1 Refund order-17 [completed]", "assistant: Refunded order-17 in full.", "memory:    about ada: Asked for a refund of order-17",
		"payments:  order-17 refunded 1 time(s)", "model:     call 1 made 1 time(s)", "model:     call 4 made 1 time(s)"} {
		assert.Contains(t, text, want)
	}
}

// scripted is the fake model server's answers without the server: the
// step of the turn's position, with tool-call ids new at every call, as a
// real model's are.
func scripted() agentloop.Model {
	steps := Script()
	n := 0
	return agentloop.ModelFunc(func(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
		pos := 0
		for _, t := range req.Turns {
			if t.Role == agentloop.RoleAssistant {
				pos++
			}
		}
		if pos >= len(steps) {
			return agentloop.Response{}, fmt.Errorf("the script has no step %d", pos+1)
		}
		n++
		resp := steps[pos]
		resp.ToolCalls = append([]agentloop.ToolCall(nil), resp.ToolCalls...)
		for i := range resp.ToolCalls {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n, i)
		}
		return resp, nil
	})
}

// verifyPayments is the payment API as the verifier's external system:
// it refunds once per idempotency key, and the verifier judges that no
// message gets its refund twice.
type verifyPayments struct {
	x       *verify.External
	message string
}

func (p verifyPayments) Refund(ctx context.Context, idempotencyKey, order string) (string, error) {
	if err := p.x.EffectOnce(ctx, idempotencyKey, "refund:"+p.message); err != nil {
		return "", err
	}
	return "re_" + idempotencyKey[len(idempotencyKey)-8:], nil
}

// The assistant keeps exactly-once under every check of the verifier:
// crashes, lost answers, duplicates, look-alike messages, transient
// errors, interrupts, stops, supersede and the storm.
func TestTheAssistantIsExactlyOnce(t *testing.T) {
	res := verify.ExactlyOnce(t, verify.Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		loop := NewLoop(scripted(), verifyPayments{x: verify.ExternalFrom(ctx), message: m.ID})
		return loop.Handler()(ctx, m)
	}))
	t.Logf("%d schedules", res.Schedules)
}

// Without a setting it needs, the assistant says which variable to set,
// before it makes any request.
func TestTheAssistantNamesTheMissingSetting(t *testing.T) {
	full := map[string]string{"BAND_API_KEY": "band_a_x", "ASSISTANT_PAYMENTS_URL": "http://127.0.0.1:1", "ANTHROPIC_API_KEY": "k",
		"BAND_BASE_URL": "http://127.0.0.1:1/api/v1", "BANDONCE_LEDGER": "mysql://x"}
	for unset, want := range map[string]string{"BAND_API_KEY": "BAND_API_KEY", "ASSISTANT_PAYMENTS_URL": "ASSISTANT_PAYMENTS_URL",
		"ANTHROPIC_API_KEY": "ANTHROPIC_API_KEY or OPENAI_API_KEY", "": "BANDONCE_LEDGER"} {
		env := map[string]string{}
		for k, v := range full {
			if k != unset {
				env[k] = v
			}
		}
		var out bytes.Buffer
		err := run(t.Context(), func(k string) string { return env[k] }, &out, slog.New(slog.DiscardHandler))
		if assert.Error(t, err, "without %s", unset) {
			assert.Contains(t, err.Error(), want)
		}
	}
}
