package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// refund is the turn's external effect: a refund for the message's
// order, made through an API that honours idempotency keys.
func refund(ctx context.Context, m *bandonce.Message, idempotencyKey string) ([]byte, error) {
	if err := ExternalFrom(ctx).EffectOnce(ctx, idempotencyKey, "refund:"+m.ID); err != nil {
		return nil, err
	}
	return []byte("re_" + m.ID[:8]), nil
}

// toolTurn is a correct turn: a thought, a journaled refund, a progress
// message, then the reply.
func toolTurn(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "planning a refund for " + m.Body()}); err != nil {
		return nil, err
	}
	receipt, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) })
	if err != nil {
		return nil, err
	}
	if err := m.Send(ctx, bandonce.Reply{Content: "refunded: " + string(receipt), Mentions: []string{m.SenderID}}); err != nil {
		return nil, err
	}
	return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}}, nil
}

func TestACorrectTurnWithManyEffectsPasses(t *testing.T) {
	res := ExactlyOnce(t, Shell(toolTurn), quickly()...)
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
}

// sendsAndSteps is a correct turn of sends around a journaled step, two
// of them before it.
func sendsAndSteps(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	for _, text := range []string{"on it", "looking up the order"} {
		if err := m.Send(ctx, bandonce.Reply{Content: text, Mentions: []string{m.SenderID}}); err != nil {
			return nil, err
		}
	}
	receipt, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) })
	if err != nil {
		return nil, err
	}
	return &bandonce.Reply{Content: "refunded: " + string(receipt), Mentions: []string{m.SenderID}}, nil
}

func TestACorrectTurnOfSendsAndStepsPasses(t *testing.T) {
	res := ExactlyOnce(t, Shell(sendsAndSteps), quickly()...)
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
}

// rawEvent posts an event straight to Band with the life's client,
// bypassing the turn's guard and its signal gate, as a handler with an
// HTTP client of its own would.
func rawEvent(ctx context.Context, env Env, room, eventType, content, key string) {
	event := map[string]any{"content": content, "message_type": eventType}
	if key != "" {
		event["metadata"] = map[string]any{"dedup_key": key}
	}
	body, _ := json.Marshal(map[string]any{"event": event})
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, env.BaseURL+"/agent/chats/"+room+"/events", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("X-API-Key", env.APIKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := env.HTTPClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// withEnv builds a Shell agent whose handler also gets the life's Env.
func withEnv(h func(ctx context.Context, env Env, m *bandonce.Message) (*bandonce.Reply, error), cfg ...bandonce.Config) Factory {
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
				return h(ctx, env, m)
			}, cfg...)()(ctx, env)
		}
	}
}

// amnesiac is a Ledger that keeps nothing: steps run again at every
// delivery, as with a ledger whose SetStep drops the record.
type amnesiac struct{}

func (amnesiac) Key(context.Context, string, string) (bandonce.KeyState, error) {
	return bandonce.KeyUnknown, nil
}
func (amnesiac) SetKey(context.Context, string, string, bandonce.KeyState) error { return nil }
func (amnesiac) AckPending(context.Context, string, string) (bool, error)        { return false, nil }
func (amnesiac) SetAckPending(context.Context, string, string, bool) error       { return nil }
func (amnesiac) Step(context.Context, string, string, string) ([]byte, bool, error) {
	return nil, false, nil
}
func (amnesiac) SetStep(context.Context, string, string, string, []byte) error { return nil }
func (amnesiac) Durable() bool                                                 { return false }

// failOnce fails a message's first delivery after its effects, so Band
// serves it again to the same life.
func failOnce(m *bandonce.Message) error {
	if m.Attempt == 1 {
		return fmt.Errorf("the model timed out on %s", m.Body())
	}
	return nil
}

var turnCatalogue = []broken{
	{"default send keys with a send order that changes between deliveries", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		texts := []string{"first, the lookup", "then, the refund"}
		if m.Attempt%2 == 0 {
			texts[0], texts[1] = texts[1], texts[0]
		}
		for _, text := range texts {
			if err := m.Send(ctx, bandonce.Reply{Content: text, Mentions: []string{m.SenderID}}); err != nil {
				return nil, err
			}
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"its effects' keys are not stable across deliveries"}},
	{"default event keys with an event order that changes between deliveries", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		types := []bandonce.EventType{bandonce.EventThought, bandonce.EventToolCall}
		if m.Attempt%2 == 0 {
			types[0], types[1] = types[1], types[0]
		}
		for _, ty := range types {
			if err := m.Event(ctx, bandonce.Event{Type: ty, Content: string(ty) + " for " + m.Body()}); err != nil {
				return nil, err
			}
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"its effects' keys are not stable across deliveries"}},
	{"a send keyed by a random DedupKey", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := m.Send(ctx, bandonce.Reply{Content: "working on it", Mentions: []string{m.SenderID}, DedupKey: fmt.Sprint("progress:", rand.Uint64())}); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"its effects' keys are not stable across deliveries"}},
	{"a payment made outside Step, with a fresh idempotency key", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := refund(ctx, m, fmt.Sprint("idem-", rand.Uint64())); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the key handed to the system is not stable across deliveries"}},
	{"a step named after the attempt", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		name := fmt.Sprint("refund-", m.Attempt)
		if _, err := m.Step(ctx, name, func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) }); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the key handed to the system is not stable across deliveries"}},
	{"a step whose result the ledger does not record", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) }); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}, bandonce.Config{Ledger: amnesiac{}}), nil, []string{"ran again after its result was recorded"}},
	{"an event sent after an interrupt, with a client of its own", withEnv(func(ctx context.Context, env Env, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := ExternalFrom(ctx).EffectOnce(ctx, "idem:"+m.ID, "work:"+m.ID); err != nil {
			if ctx.Err() != nil {
				// Report the cancellation to the room: the shell would
				// refuse, so it goes around it.
				rawEvent(ctx, env, m.RoomID, "error", "cancelled: "+m.Body(), "cancelled:"+m.ID)
			}
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"work went on after an interrupt", "work went on in a stopped room"}},
	{"an event keyed but posted around the guard", withEnv(func(ctx context.Context, env Env, m *bandonce.Message) (*bandonce.Reply, error) {
		rawEvent(ctx, env, m.RoomID, "task", "task opened for "+m.Body(), "task:"+m.ID)
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"a double post"}},
	{"a progress event without a dedup key", withEnv(func(ctx context.Context, env Env, m *bandonce.Message) (*bandonce.Reply, error) {
		rawEvent(ctx, env, m.RoomID, "thought", "thinking about "+m.Body(), "")
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"carried no dedup key"}},
}

func TestEveryBrokenTurnIsCaughtWithItsDefectNamed(t *testing.T) {
	require.GreaterOrEqual(t, len(turnCatalogue), 8)
	for _, b := range turnCatalogue {
		t.Run(b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			require.Len(t, m.Errors(), 1)
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}
