package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// This file holds broken agents of the classes of defect the verifier
// was once blind to, by class, each caught at the default settings with
// its defect named and a hint naming the fix, and the correct agents of
// each class that must pass.

// hinted is a broken agent of a class: its verdict names the defect
// (one of reason) and the fix (one of hint).
type hinted struct {
	class   string
	name    string
	factory Factory
	opts    []Option
	reason  []string
	hint    []string
}

// answer is a turn's answer to m.
func answer(m *bandonce.Message) string { return "the answer to " + m.Body() }

// blindSpots builds the table afresh for each run: a factory such as
// cachedPayer holds state its lives share, which must not outlive one
// run of the test (-count=N runs it N times in one process).
func blindSpots() []hinted {
	return []hinted{
		// 1. Signals outside the one window the checks aim at.
		{"signals", "a loop that ignores agent-wide signals", sockLoop(sockFlaws{ignoreAgentWide: true}),
			nil, []string{"work after an interrupt", "work went on after an interrupt"}, []string{"room_id"}},
		{"signals", "a loop that drops a signal before its handler starts", sockLoop(sockFlaws{armLate: true}),
			nil, []string{"work after an interrupt", "work went on after an interrupt", "work in a stopped room", "work went on in a stopped room"}, []string{"from the moment it is served"}},
		{"signals", "a loop that debounces a second signal of one mode", sockLoop(sockFlaws{debounce: true}),
			nil, []string{"work after an interrupt", "work went on after an interrupt"}, []string{"every signal"}},
		{"signals", "a loop that joins agent_control on its first connection only", sockLoop(sockFlaws{controlOnce: true}),
			nil, []string{"signals unheard after a reconnect"}, []string{"again on every connection"}},
		{"signals", "a loop that returns on supersede while its rooms still work", sockLoop(sockFlaws{leaveRooms: true}),
			nil, []string{"work left running"}, []string{"wait for them before returning"}},
		{"signals", "a loop that skips the room's next message after an interrupt that found no turn", sockLoop(sockFlaws{skipAfterIdle: true}),
			// The default run catches it at the storm's 18th schedule: that one.
			[]Option{Seed(DefaultSeed + 17), Schedules(1)}, []string{"an interrupt that found no turn was kept"}, []string{"is then forgotten"}},
		{"signals", "a loop that acks an interrupted message before it cancels the turn", sockLoop(sockFlaws{ackBeforeCancel: true}),
			// The default run catches it at the interrupt check's 12th schedule: that one.
			[]Option{Seed(DefaultSeed + 11), Schedules(1)}, []string{"work after an interrupt"}, []string{"cancel the turn first, then mark the message processed"}},

		// 2. What the room shows, not only keys.
		{"room", "the answer sent with Send and returned as the Reply too", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Send(ctx, bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}, nil
		}), nil, []string{"shows", "twice"}, []string{"must not return it as the Reply too"}},
		{"room", "a progress message under the reply's key", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Send(ctx, bandonce.Reply{Content: "working on it", Mentions: []string{m.SenderID}, DedupKey: bandonce.DefaultKey(m.ID)}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}, nil
		}), nil, []string{"a lost answer"}, []string{"give each its own DedupKey"}},
		{"room", "a progress message under one key for every message", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Send(ctx, bandonce.Reply{Content: "working on " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: "progress"}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}, nil
		}), nil, []string{"a lost effect"}, []string{"put the message's ID in it"}},
		{"room", "a progress event under one key for every message", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "working on " + m.Body(), DedupKey: "progress"}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}, nil
		}), nil, []string{`a lost effect: a turn of r1m2 sent under the key "progress"`}, []string{"put the message's ID in it"}},

		// 3. Keys that are not stable, or not unique.
		{"keys", "a reply keyed by the model's wording", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			a, err := ExternalFrom(ctx).Model(ctx, m.Body())
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256([]byte(a.Text))
			return &bandonce.Reply{Content: a.Text, Mentions: []string{m.SenderID}, DedupKey: "answer:" + hex.EncodeToString(sum[:6])}, nil
		}), nil, []string{"the dedup key changed between deliveries"}, []string{"never from a model's output"}},
		{"keys", "tool call ids as effect keys", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			a, err := ExternalFrom(ctx).Model(ctx, m.Body())
			if err != nil {
				return nil, err
			}
			for _, tc := range a.ToolCalls {
				if err := once(ctx, "tool:"+tc.ID); err != nil {
					return nil, err
				}
			}
			return &bandonce.Reply{Content: a.Text, Mentions: []string{m.SenderID}}, nil
		}), nil, []string{"a lost effect"}, []string{"put the message's ID in it"}},
		{"keys", "an effect keyed by the tool the model chose", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			a, err := ExternalFrom(ctx).Model(ctx, m.Body())
			if err != nil {
				return nil, err
			}
			if err := once(ctx, "tool:"+m.ID+":"+a.ToolCalls[0].Name); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: a.Text, Mentions: []string{m.SenderID}}, nil
		}), nil, []string{"the effect key changed between deliveries"}, []string{"never from a model's output"}},

		// 4. Effects beyond sends and events.
		{"band writes", "a follow-up room created with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if _, err := m.Band().CreateRoom(ctx, "follow-up for "+m.ID); err != nil {
				return nil, err
			}
			if err := failOnce(m); err != nil {
				return nil, err
			}
			return reply(m, ""), nil
		}), nil, []string{"a double effect: a room created"}, []string{"create it with Message.CreateRoom"}},
		{"band writes", "a hand-off that invites a peer and lets it go at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			room, err := m.CreateRoom(ctx, "follow-up for "+m.ID)
			if err != nil {
				return nil, err
			}
			peers, err := m.Peers(ctx)
			if err != nil || len(peers) == 0 {
				return nil, fmt.Errorf("no peer to hand off to: %w", err)
			}
			if _, err := m.Band().AddParticipant(ctx, room.ID, peers[0].ID, ""); err != nil {
				return nil, err
			}
			if err := m.Band().RemoveParticipant(ctx, room.ID, peers[0].ID); err != nil {
				return nil, err
			}
			if err := failOnce(m); err != nil {
				return nil, err
			}
			return reply(m, ""), nil
		}), nil, []string{"a double effect: a participant added"}, []string{"record the change in a Message.Step"}},

		// 5. Effects outside a turn.
		{"hooks", "billing from the Outcome hook once the message is replied", hooked(func(x *External) bandonce.Hooks {
			return bandonce.Hooks{Outcome: func(o bandonce.Outcome) {
				if key := "bill:" + o.MessageID; o.Kind == bandonce.Replied && x.Performed(key) == 0 {
					_ = x.Effect(context.Background(), key)
				}
			}}
		}), nil, []string{"its effect was never performed"}, []string{"perform it in the handler, as a Message.Step"}},
		{"hooks", "billing from the Outcome hook once per room", hooked(func(x *External) bandonce.Hooks {
			return bandonce.Hooks{Outcome: func(o bandonce.Outcome) {
				if key := "bill:" + o.RoomID; o.Kind == bandonce.Replied && x.Performed(key) == 0 {
					_ = x.Effect(context.Background(), key)
				}
			}}
		}), nil, []string{"a lost effect", "its effect was never performed"}, []string{"put the message's ID in it", "perform it in the handler"}},
		{"hooks", "billing from HandlerEnd at every delivery that succeeded", hooked(func(x *External) bandonce.Hooks {
			return bandonce.Hooks{HandlerEnd: func(ctx context.Context, d bandonce.Delivery, _ time.Duration, err error) {
				if err == nil {
					_ = x.Effect(context.WithoutCancel(ctx), "bill:"+d.MessageID)
				}
			}}
		}), nil, []string{"a non-idempotent side effect"}, []string{"from a hook"}},

		// 6. State a restart loses.
		{"restart", "a step relied on with a MemoryLedger set in Config", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if _, err := m.Step(ctx, "refund", func(ctx context.Context, _ string) ([]byte, error) {
				return nil, ExternalFrom(ctx).Effect(ctx, "refund:"+m.ID)
			}); err != nil {
				return nil, err
			}
			return reply(m, ""), nil
		}, bandonce.Config{Ledger: bandonce.NewMemoryLedger()}), nil, []string{"a non-idempotent side effect"}, []string{"a MemoryLedger is lost with the process"}},
		{"restart", "a cache of paid orders shared by the lives", cachedPayer(), nil, []string{"state that a restart loses"}, []string{"ask External.Performed"}},

		// 7. A world that disagrees with itself.
		{"clock", "messages older than ten minutes dropped as stale", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if time.Since(m.InsertedAt) > 10*time.Minute {
				return nil, nil // stale: nobody waits for it any more, it thought
			}
			return reply(m, ""), nil
		}), nil, []string{"a lost"}, []string{"however old"}},
		{"clock", "a redelivered old message assumed answered", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := idempotent(ctx, m); err != nil {
				return nil, err
			}
			if m.Attempt > 1 && time.Since(m.InsertedAt) > 5*time.Minute {
				return nil, nil // surely answered by now, it thought
			}
			return reply(m, ""), nil
		}), nil, []string{"a lost"}, []string{"however old"}},
	}
}

// cachedPayer pays each message's order once, as far as a cache its lives
// share remembers: in a real process the cache dies with it.
func cachedPayer() Factory {
	var paid sync.Map
	return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, done := paid.Load(m.ID); !done {
			if err := ExternalFrom(ctx).Effect(ctx, "pay:"+m.ID); err != nil {
				return nil, err
			}
			paid.Store(m.ID, true)
		}
		return reply(m, ""), nil
	})
}

// hooked is an echo agent on the Shell whose hooks, built from the life's
// External, perform its effects.
func hooked(hooks func(x *External) bandonce.Hooks) Factory {
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
				return reply(m, ""), nil
			}, bandonce.Config{Hooks: hooks(env.External)})()(ctx, env)
		}
	}
}

func TestEveryBlindSpotIsCaughtWithItsDefectAndItsFixNamed(t *testing.T) {
	for _, b := range blindSpots() {
		t.Run(b.class+"/"+b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			require.Len(t, m.Errors(), 1)
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			assert.True(t, containsAny(res.Reason, b.hint), "reason %q hints none of %q", res.Reason, b.hint)
			assert.NotEmpty(t, res.Witness, "a witness replays it")
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}

// controls are correct agents of the blind spots' classes.
var controls = map[string]Factory{
	"room: a progress message, then the answer as the Reply": Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := m.Send(ctx, bandonce.Reply{Content: "working on it", Mentions: []string{m.SenderID}}); err != nil {
			return nil, err
		}
		return &bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}, nil
	}),
	// Not here: a model consulted in a Step, its effects keyed by their
	// place in its answer (modelInAStep). That is correct only on a
	// durable ledger; see TestAModelConsultedInAStepIsCorrectOnlyOnADurableLedger.
	"band writes: a follow-up room created with Message.CreateRoom": Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.CreateRoom(ctx, "follow-up for "+m.ID); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}),
	"hooks: a metric counted from the Outcome hook, the effect in the handler": func() Agent {
		return func(ctx context.Context, env Env) error {
			return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
				if _, err := m.Step(ctx, "bill", func(ctx context.Context, key string) ([]byte, error) {
					return nil, ExternalFrom(ctx).EffectOnce(ctx, key, "bill:"+m.ID)
				}); err != nil {
					return nil, err
				}
				return reply(m, ""), nil
			}, bandonce.Config{Hooks: bandonce.Hooks{Outcome: func(bandonce.Outcome) {}}})()(ctx, env)
		}
	},
	"restart: a journaled refund through an idempotent API, a MemoryLedger set in Config": Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) }); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}, bandonce.Config{Ledger: &bandonce.MemoryLedger{MaxKeysPerRoom: 100}}),
	"clock: a message's age logged from Band's clock and the agent's": Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		age := time.Since(m.InsertedAt)
		if age < 0 {
			return nil, fmt.Errorf("the message of %s is from the future: Band's clock and the agent's disagree", m.InsertedAt)
		}
		return &bandonce.Reply{Content: fmt.Sprintf("answered after %s", age.Round(time.Minute)), Mentions: []string{m.SenderID}}, nil
	}),
	"room: the answer sent with Send, no Reply": Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := m.Send(ctx, bandonce.Reply{Content: answer(m), Mentions: []string{m.SenderID}}); err != nil {
			return nil, err
		}
		return nil, nil
	}),
}

// modelInAStep asks the model once, in a Step, and performs the tools
// its answer calls, each keyed by the message and its place in the
// answer: stable as long as the Step's record survives a crash.
func modelInAStep() Factory {
	return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		raw, err := m.Step(ctx, "model", func(ctx context.Context, _ string) ([]byte, error) {
			a, err := ExternalFrom(ctx).Model(ctx, m.Body())
			if err != nil {
				return nil, err
			}
			return json.Marshal(a)
		})
		if err != nil {
			return nil, err
		}
		var a ModelAnswer
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		for i := range a.ToolCalls {
			if err := once(ctx, fmt.Sprintf("tool:%s:%d", m.ID, i)); err != nil {
				return nil, err
			}
		}
		return &bandonce.Reply{Content: a.Text, Mentions: []string{m.SenderID}}, nil
	})
}

// With the schedule's ledger kept across its lives (DurableLedger), the
// recorded answer survives every crash and the agent is correct; with a
// fresh MemoryLedger per life, a crash forgets it, the model answers
// anew, and place i of the new answer is another tool than place i of
// the old: the verifier catches that.
func TestAModelConsultedInAStepIsCorrectOnlyOnADurableLedger(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, modelInAStep(), quickly(DurableLedger())...)
	require.True(t, res.OK, "%s: %s\n%s", res.Check, res.Reason, strings.Join(res.Witness, "\n"))
	assert.Contains(t, strings.Join(m.Logs(), "\n"), scheduleLedgerNote, "the receipt says what the lives shared")

	m = newMockT(t)
	// The default run catches it at its check's 6th schedule: that one.
	res = ExactlyOnce(m, modelInAStep(), Seed(DefaultSeed+5), Schedules(1))
	require.False(t, res.OK, "a fresh MemoryLedger per life forgets the Step's record")
	assert.Contains(t, res.Reason, "its record was in a MemoryLedger, lost with the crash", "the verdict explains itself")
	assert.Contains(t, res.Reason, "DurableLedger()")
	assert.NotEmpty(t, res.Witness)
	t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
}

func TestTheCorrectAgentsOfEveryBlindSpotPass(t *testing.T) {
	for name, f := range controls {
		t.Run(name, func(t *testing.T) {
			m := newMockT(t)
			var opts []Option
			if strings.Contains(name, "no Reply") {
				opts = append(opts, MayNotReply())
			}
			res := ExactlyOnce(m, f, quickly(opts...)...)
			require.True(t, res.OK, "%s: %s\n%s", res.Check, res.Reason, strings.Join(res.Witness, "\n"))
		})
	}
}
