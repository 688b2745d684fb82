package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
)

// memoryOf is what the turns below remember about a message.
func memoryOf(m *bandonce.Message) band.NewMemory {
	return band.NewMemory{Content: "asked: " + m.Body(), System: "long_term", Type: "episodic", Segment: "user",
		Thought: "to recall it", Scope: "subject", SubjectID: m.SenderID}
}

// Writes of Band's agent API made with the raw client, under a key but
// without its guard, at every delivery: each is named by its own
// violation.
var agentWriteCatalogue = []broken{
	{"a memory stored with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		mem := memoryOf(m)
		mem.Metadata = map[string]any{"dedup_key": bandonce.DefaultKey(m.ID) + ":memory:1"}
		if _, err := m.Band().CreateMemory(ctx, mem); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the memory with key"}},
	{"a task created with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Band().CreateTask(ctx, m.RoomID, band.NewTask{Subject: "handle " + m.Body(),
			Detail: "[dedup_key:" + bandonce.DefaultKey(m.ID) + ":task:1]"}); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the task with key"}},
	{"a comment posted with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		task, err := m.CreateTask(ctx, bandonce.Task{Subject: "handle " + m.Body()})
		if err != nil {
			return nil, err
		}
		if _, err := m.Band().UpdateTask(ctx, m.RoomID, task.ID, band.TaskUpdate{
			Comment: "done\n[dedup_key:" + bandonce.DefaultKey(m.ID) + ":comment:1]"}); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the comment with key"}},
	{"a room created with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Band().CreateRoom(ctx, "follow-up [bo:0123456789ab]"); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"the room with marker"}},
}

// Writes without a key, which the fake's truth cannot tell apart, made at
// every delivery: the table's request rule catches the redelivery that
// made one again in the same life.
var unkeyedWriteCatalogue = []broken{
	{"a memory without a key stored with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Band().CreateMemory(ctx, memoryOf(m)); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"a double effect: a memory stored"}},
	{"a task without a key created with the raw client at every delivery", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := m.Band().CreateTask(ctx, m.RoomID, band.NewTask{Subject: "handle " + m.Body()}); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), nil, []string{"a double effect: a task created"}},
}

func TestEveryUnkeyedAgentAPIWriteMadeTwiceInALifeIsNamed(t *testing.T) {
	for _, b := range unkeyedWriteCatalogue {
		t.Run(b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			assert.Contains(t, res.Reason, "Message.", "the fix names the guarded method")
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}

// A write idempotent by nature needs no guard: the board's goal set at
// every delivery, with the raw client, passes.
func TestAGoalSetAtEveryDeliveryPasses(t *testing.T) {
	res := ExactlyOnce(t, Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		title := "answer " + m.Body()
		if _, err := m.Band().SetGoal(ctx, m.RoomID, band.Goal{Title: &title}); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), quickly()...)
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
}

func TestEveryDoubleAgentAPIWriteIsNamed(t *testing.T) {
	for _, b := range agentWriteCatalogue {
		t.Run(b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}

// The same writes through the Message's guarded methods pass every check.
func TestGuardedAgentAPIWritesPass(t *testing.T) {
	res := ExactlyOnce(t, Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		mem := memoryOf(m)
		if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: mem.Content, System: mem.System, Type: mem.Type,
			Segment: mem.Segment, Thought: mem.Thought, SubjectID: mem.SubjectID}); err != nil {
			return nil, err
		}
		task, err := m.CreateTask(ctx, bandonce.Task{Subject: "handle " + m.Body()})
		if err != nil {
			return nil, err
		}
		if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed", Comment: "done"}); err != nil {
			return nil, err
		}
		if _, err := m.CreateRoom(ctx, "follow-up"); err != nil {
			return nil, err
		}
		if err := failOnce(m); err != nil {
			return nil, err
		}
		return reply(m, ""), nil
	}), quickly()...)
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
}
