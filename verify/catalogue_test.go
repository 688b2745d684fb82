package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
)

// broken is one deliberately broken agent of the catalogue, with the
// words its verdict must contain.
type broken struct {
	name    string
	factory Factory
	opts    []Option
	reason  []string // the reason must contain one of these
}

func reply(m *bandonce.Message, key string) *bandonce.Reply {
	return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: key}
}

// idempotent performs the message's effect once, as the reference does.
func idempotent(ctx context.Context, m *bandonce.Message) error {
	x := ExternalFrom(ctx)
	if key := "notify:" + m.ID; x.Performed(key) == 0 {
		return x.Effect(ctx, key)
	}
	return nil
}

// shellHandler builds a Shell agent whose handler does its effect
// idempotently and replies with the key keyOf chooses.
func shellHandler(keyOf func(m *bandonce.Message) string) Factory {
	return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := idempotent(ctx, m); err != nil {
			return nil, err
		}
		return reply(m, keyOf(m)), nil
	})
}

var catalogue = []broken{
	// band-once 0.1's defects, as hand-made loops over the REST API.
	{"0.1: the guard reads one page of /context", handLoop(loopFlaws{onePageGuard: true}),
		[]Option{NoControlSignals()}, []string{"a double post"}},
	{"0.1: the guard matches substrings", handLoop(loopFlaws{substringGuard: true}),
		[]Option{NoControlSignals()}, []string{"a guard matching substrings"}},
	{"0.1: a POST is re-sent blind", handLoop(loopFlaws{blindRetry: true}),
		[]Option{NoControlSignals()}, []string{"a double post"}},
	{"0.1: a failed message stalls the room", handLoop(loopFlaws{stallOnFailed: true}),
		[]Option{NoControlSignals()}, []string{"a stalled room"}},
	{"0.1: a failed ack is turned into failed", handLoop(loopFlaws{failAfterAck: true}),
		[]Option{NoControlSignals()}, []string{"a failed acknowledgement became a failure"}},
	{"a loop that marks processed before it posts", handLoop(loopFlaws{ackBeforePost: true}),
		[]Option{NoControlSignals()}, []string{"a lost reply"}},

	// Handler-level bugs on the Shell.
	{"a random dedup key", shellHandler(func(*bandonce.Message) string { return fmt.Sprint("r:", rand.Uint64()) }),
		nil, []string{"the dedup key changed between deliveries"}},
	{"a time-based dedup key", shellHandler(func(m *bandonce.Message) string { return "t:" + time.Now().Format(time.StampMilli) }),
		nil, []string{"the dedup key changed between deliveries", "the dedup key is too coarse"}},
	{"an attempt-based dedup key", shellHandler(func(m *bandonce.Message) string { return fmt.Sprintf("%s:%d", m.ID, m.Attempt) }),
		nil, []string{"the dedup key changed between deliveries"}},
	{"a key too coarse: one per room", shellHandler(func(m *bandonce.Message) string { return "room:" + m.RoomID }),
		nil, []string{"the dedup key is too coarse"}},
	{"a non-idempotent external side effect", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := ExternalFrom(ctx).Effect(ctx, "notify:"+m.ID); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"a non-idempotent side effect"}},
	{"an effect performed before the guard", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := ExternalFrom(ctx).Effect(ctx, "notify:"+m.ID); err != nil {
			return nil, err
		}
		// The guard comes too late: the effect already ran again.
		items, err := m.RoomContext(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if k, ok := oracle.MarkerKey(it.Content); ok && k == bandonce.DefaultKey(m.ID) {
				return nil, nil
			}
		}
		return reply(m, ""), nil
	}), nil, []string{"a non-idempotent side effect"}},
	{"work continued after an interrupt", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		x := ExternalFrom(ctx)
		for _, step := range []string{"draft:", "send:"} {
			if key := step + m.ID; x.Performed(key) == 0 {
				_ = x.Effect(ctx, key) // the cancellation is ignored: on to the next step
			}
		}
		return reply(m, ""), nil
	}), nil, []string{"work went on after an interrupt", "work went on in a stopped room", "never happened"}},
	{"a handler that blocks without honouring its context", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		x := ExternalFrom(ctx)
		if key := "notify:" + m.ID; x.Performed(key) == 0 {
			if err := x.Effect(context.Background(), key); err != nil {
				return nil, err
			}
		}
		return reply(m, ""), nil
	}), nil, []string{"it blocks without honouring its context", "called with a context that nothing can cancel"}},
}

func TestEveryBrokenAgentIsCaughtWithItsDefectNamed(t *testing.T) {
	require.GreaterOrEqual(t, len(catalogue), 12)
	for _, b := range catalogue {
		t.Run(b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			errs := m.Errors()
			require.Len(t, errs, 1, "one violation is reported through t.Errorf")
			assert.Contains(t, errs[0], res.Reason)
			assert.Contains(t, errs[0], fmt.Sprintf("seed %d", res.FirstViolatingSeed))
			assert.Contains(t, errs[0], "replay: "+res.Replay)
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			assert.NotEmpty(t, res.Witness)
			assert.Contains(t, res.Replay, fmt.Sprintf("%s=%d", EnvSeed, res.FirstViolatingSeed))
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestACorrectHandWrittenLoopPasses(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, handLoop(loopFlaws{}), quickly(NoControlSignals())...)
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
	// Without a socket the control checks cannot apply, and say so.
	for _, check := range []string{"interrupt", "stop-and-play", "supersede"} {
		assert.True(t, containsAny(strings.Join(res.NotApplicable, "\n"), []string{check + ": " + noSocket}), check)
	}
	assert.NotEmpty(t, m.Logs(), "what was not exercised is logged")
}
