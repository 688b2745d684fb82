package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/agentloop/fakemodel"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/examplekit"
	"github.com/band-once/bandonce/internal/killtest"
)

// turnRun is one refund request served by the assistant process behind
// the kill proxy: the fake Band, the fake model server (reached through
// the Anthropic SDK) and the payment API, all run by the test.
type turnRun struct {
	band     *fakeband.Band
	agent    fakeband.Agent
	ada      fakeband.Human
	room     fakeband.Room
	msg      string
	model    *fakemodel.Server
	payments *examplekit.PaymentsServer
	proxy    *killtest.Proxy
	// shells is how many shells served the turn (killtest.Serve).
	shells int
}

// runTurn serves the request, killing the process at the turn's request
// at (never, for at 0) and restarting it, on the ledger spec names
// (BANDONCE_LEDGER: "" for memory, bolt:PATH, a postgres:// URL).
func runTurn(t *testing.T, bin string, at int, after bool, ledger string) *turnRun {
	t.Helper()
	stage := examplekit.NewStage(27, "assistant", "ada")
	t.Cleanup(stage.Close)
	fb, agent, ada, room := stage.Band, stage.Agent, stage.Humans[0], stage.Room
	base, err := fb.Listen("127.0.0.1:0")
	require.NoError(t, err)
	model, err := fakemodel.New(Script()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	msg, err := fb.Say(room.ID, ada.ID, "Hi, my teapot (order-17) arrived broken, can I get a refund?", agent.ID)
	require.NoError(t, err)

	proxy, front, env := killtest.Front(t, base, agent.Key, msg, at, after, func(_, path string) bool {
		return strings.Contains(path, "/chats/"+room.ID+"/") || strings.Contains(path, "/agent/memories")
	}, killtest.Upstream{Prefix: "/pay", Target: stage.PaymentsURL}, killtest.Upstream{Prefix: "/model", Target: model.URL})
	env = append(env, "ASSISTANT_PAYMENTS_URL="+front+"/pay",
		"ANTHROPIC_API_KEY=fake-key", "ANTHROPIC_BASE_URL="+front+"/model/", "OPENAI_API_KEY=",
		"BANDONCE_LEDGER="+ledger,
		// With PostgreSQL, a restarted life waits for the killed one's
		// lease to run out: short, so the kills stay quick.
		"BANDONCE_LEASE_TIME=1s")
	shells := killtest.Serve(t, bin, env, proxy, "assistant: serving", func() bool { return fb.Status(agent.ID, msg) == fakeband.StatusProcessed })
	return &turnRun{band: fb, agent: agent, ada: ada, room: room, msg: msg, model: model, payments: stage.Payments, proxy: proxy, shells: shells}
}

// check asserts that every effect of the turn happened once: the reply,
// the thought, the task with its comment and its end state, the memory,
// and the refund, under one idempotency key.
func (r *turnRun) check(t *testing.T) {
	t.Helper()
	prefix := "msg:" + r.msg
	tool := prefix + ":agentloop:tool:"
	replies := map[string]int{}
	for _, p := range r.band.Posts(r.room.ID) {
		if p.SenderID == r.agent.ID {
			replies[p.Content]++
		}
	}
	assert.Equal(t, map[string]int{"@[[" + r.ada.ID + "]] I refunded order-17 in full (42.00 EUR).\n[dedup_key:" + prefix + "]": 1}, replies, "the reply, once")
	events := map[string]int{}
	for _, e := range r.band.ChatEvents(r.room.ID) {
		var meta map[string]any
		require.NoError(t, json.Unmarshal(e.Metadata, &meta))
		events[fmt.Sprintf("%s %v", e.MessageType, meta["dedup_key"])]++
	}
	assert.Equal(t, map[string]int{"thought " + tool + "1:0": 1}, events, "the thought, once")
	tasks := r.band.Tasks(r.room.ID)
	require.Len(t, tasks, 1, "one task on the board")
	assert.Equal(t, "Asked in this room.\n[dedup_key:"+tool+"1:2]", tasks[0].Detail)
	require.Len(t, tasks[0].Comments, 1, "one comment on it")
	assert.Equal(t, "Refunded order-17 in full.\n[dedup_key:"+tool+"3:0]", tasks[0].Comments[0].Text)
	assert.Equal(t, []fakeband.TaskAssignment{{AssigneeID: r.agent.ID, Status: "completed", ActiveForm: "refunding order-17"}}, tasks[0].Assignments)
	memories := r.band.Memories()
	require.Len(t, memories, 1, "one memory")
	var meta map[string]any
	require.NoError(t, json.Unmarshal(memories[0].Metadata, &meta))
	assert.Equal(t, tool+"3:1", meta["dedup_key"])
	assert.Equal(t, r.ada.ID, memories[0].SubjectID)
	assert.Equal(t, map[string]int{"order-17": 1}, r.payments.Refunds(), "one refund")
	assert.Len(t, r.payments.Calls(), 1, "one idempotency key at every delivery")
}

// modelCalls returns the positions (from 1) of the turn's model calls.
func modelCalls(turn []string) []int {
	var at []int
	for i, r := range turn {
		if r == "POST v1/messages" {
			at = append(at, i+1)
		}
	}
	return at
}

// The assistant as users run it: a separate process on the Anthropic
// SDK, SIGKILLed at every request of one turn in turn (Band's, the
// model's and the payment API's; before the request and after the server
// applied it), restarted each time. On every ledger the refund is made
// once, under one idempotency key, and each Band write and the reply are
// in the fake's truth once. On a durable ledger (bolt, PostgreSQL) each
// model call is made once per journaled step: only a call whose answer
// died with the process is made again, and only a kill between the
// refund and its record makes the refund step call the API again (the
// key makes that call refund nothing). On the memory ledger the journal
// dies with the process, so the restarted life asks the model again from
// the first call: there the position-derived keys alone keep the effects
// once, and the model calls are not counted.
func TestTheAssistantProcessSurvivesSIGKILLAtEveryRequestOfATurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the assistant as a process, dozens of times")
	}
	bin := killtest.Build(t, "assistant")
	dry := runTurn(t, bin, 0, false, "")
	dry.check(t)
	turn := dry.proxy.Requests()
	t.Logf("the turn's %d requests: %s", len(turn), strings.Join(turn, ", "))
	// Each Band tool's write carries the loop's key, the call's place in
	// the turn under the message's key, so a first delivery writes it
	// without a read (docs/turns.md).
	require.Equal(t, []string{
		"POST api/v1/agent/chats/{id}/messages/{id}/processing",
		"POST v1/messages", // the model: a thought, order_status, a task
		"POST api/v1/agent/chats/{id}/events",
		"POST api/v1/agent/chats/{id}/tasks",
		"POST v1/messages", // the task in progress, the refund
		"POST api/v1/agent/chats/{id}/tasks/1",
		"POST refunds",
		"POST v1/messages", // the task completed with a comment, a memory
		"POST api/v1/agent/chats/{id}/tasks/1",
		"POST api/v1/agent/memories",
		"POST v1/messages", // the final answer
		"POST api/v1/agent/chats/{id}/messages",
		"POST api/v1/agent/chats/{id}/messages/{id}/processed",
	}, turn, "the turn, as the proxy numbers it")
	assert.Equal(t, map[int]int{1: 1, 2: 1, 3: 1, 4: 1}, dry.model.Answered(), "each model call once")

	for _, ledger := range []string{"memory", "bolt", "postgres"} {
		for at := 1; at <= len(turn); at++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s ledger, kill at %d (%s), after=%v", ledger, at, turn[at-1], after), func(t *testing.T) {
					spec := ""
					switch ledger {
					case "bolt":
						spec = "bolt:" + filepath.Join(t.TempDir(), "agent.ledger")
					case "postgres":
						spec = killtest.FreshDatabase(t, "assistant_kill")
					}
					r := runTurn(t, bin, at, after, spec)
					killed, seen := r.proxy.Killed()
					require.True(t, killed, "the assistant was killed at the turn's request %d", at)
					require.Equal(t, at, seen, "the kill came at the turn's request %d", at)
					r.check(t)
					if ledger == "memory" {
						return
					}
					// The model call whose answer died with the process
					// is the one made twice.
					want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1}
					if after && turn[at-1] == "POST v1/messages" {
						want[slices.Index(modelCalls(turn), at)+1] = 2
					}
					// Two lives, one shell each; a shell more is a lease
					// lost and taken again, which may repeat the step in
					// flight once (its record not yet written).
					extra := r.shells - 2
					assertModelCalls(t, want, r.model.Answered(), extra, after)
					if !(after && turn[at-1] == "POST refunds") {
						for key, n := range r.payments.Calls() {
							assert.LessOrEqual(t, n, 1+extra, "the journal kept the refund step from running again (%s)", key)
						}
					}
				})
			}
		}
	}
}

// assertModelCalls checks how many times each step's model call was
// answered: exactly want, or, when extra shells ran (a lease lost and
// taken again on a busy machine), every step at least once and no more
// calls repeated than one per extra shell (each can repeat only the step
// it was in) and one for a kill after a call's answer. A shell more in
// the first life repeats requests before the kill, so the kill may come
// at another step than the dry run's numbering says: which step was
// asked again is not checked then.
func assertModelCalls(t *testing.T, want, got map[int]int, extra int, after bool) {
	t.Helper()
	if extra <= 0 {
		assert.Equal(t, want, got, "each model call made once per journaled step")
		return
	}
	t.Logf("%d shell(s) more than the two lives: the lease was lost and taken again", extra)
	more := 0
	for step, n := range got {
		assert.Contains(t, want, step, "step %d is not in the script", step)
		more += n - 1
	}
	for step := range want {
		assert.GreaterOrEqual(t, got[step], 1, "step %d", step)
	}
	if after {
		extra++ // the kill's own
	}
	assert.LessOrEqual(t, more, extra, "at most one repeated model call per shell that took the lease again: %v", got)
}
