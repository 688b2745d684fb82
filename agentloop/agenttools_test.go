package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/fakeband"
)

// boardScript is a model turn that uses every tool of Band's agent API:
// a memory, a task created then joined and completed with a comment, the
// room's goal, then a final answer.
func boardScript() *script {
	return &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolStoreMemory, `{"content":"ada asked for a refund of order-17","thought":"a later request should know","type":"episodic","tags":["refunds"]}`),
			call(agentloop.ToolCreateTask, `{"subject":"Refund order-17","detail":"asked in this room"}`),
		}},
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolUpdateTask, `{"task":"#1","status":"in_progress","active_form":"refunding order-17"}`),
			call(agentloop.ToolSetGoal, `{"title":"Refunds"}`),
		}},
		{ToolCalls: []agentloop.ToolCall{call(agentloop.ToolUpdateTask, `{"task":"1","status":"completed","comment":"Refunded order-17."}`)}},
		{Text: "refunded"},
	}}
}

// boardWrites counts, from the fake's truth, the writes of boardScript's
// turn, by kind and key.
func (w *world) boardWrites(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, mem := range w.fb.Memories() {
		var meta map[string]any
		if err := json.Unmarshal(mem.Metadata, &meta); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("memory %s %s %v about %s", mem.Type, meta["dedup_key"], meta["tags"], mem.SubjectID)]++
	}
	for _, task := range w.fb.Tasks(w.room.ID) {
		_, marker, _ := strings.Cut(task.Detail, "\n")
		out["task "+task.Subject+" "+marker]++
		for _, c := range task.Comments {
			out["comment "+strings.ReplaceAll(c.Text, "\n", " ")]++
		}
		for _, a := range task.Assignments {
			out["status "+a.Status+" "+a.ActiveForm]++
		}
	}
	if bd, ok := w.fb.RoomBoard(w.room.ID); ok {
		out["goal "+bd.GoalTitle] = bd.Changes
	}
	return out
}

func wantBoardWrites(w *world, msg string) map[string]int {
	k := bandonce.DefaultKey(msg) + ":agentloop:tool:"
	return map[string]int{
		"memory episodic " + k + "1:0 [refunds] about " + w.ada.ID: 1,
		"task Refund order-17 [dedup_key:" + k + "1:1]":            1,
		"comment Refunded order-17. [dedup_key:" + k + "3:0]":      1,
		"status completed refunding order-17":                      1,
		"goal Refunds":                                             1,
	}
}

// Band's agent-API tools write through the Message's guarded writes: a
// turn delivered twice (the first delivery failing after the loop) stores
// its memory, creates its task and posts its comment once, sets its goal
// once, and leaves the task completed.
func TestBandsAgentAPIToolsWriteOnceAcrossARedelivery(t *testing.T) {
	w := newWorld(t)
	m := boardScript()
	loop := &agentloop.Loop{Model: m, Tools: agentloop.BandTools()}
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		res, err := loop.Run(ctx, msg)
		if err != nil {
			return nil, err
		}
		if msg.Attempt == 1 {
			return nil, errors.New("crash after the loop")
		}
		return &bandonce.Reply{Content: res.Text, Mentions: []string{msg.SenderID}}, nil
	})
	msg := w.say(t, "please refund order-17")
	w.waitStatus(t, msg, fakeband.StatusProcessed)

	if got, want := w.boardWrites(t), wantBoardWrites(w, msg); !equal(got, want) {
		t.Errorf("writes in the fake's truth:\n got %v\nwant %v", got, want)
	}
	m.mu.Lock()
	turns := m.seen[1].Turns
	m.mu.Unlock()
	if r := turns[3]; r.IsError || !strings.HasPrefix(r.Text, "created task #1 (id ") {
		t.Errorf("the model read %+v for the task it created", r)
	}
	if calls, _ := m.counts(); calls != 4 {
		t.Errorf("model calls: %d, want 4 (the second delivery replays them)", calls)
	}
}

// A write whose answer was lost is found again by its key at the next
// delivery, and a fresh ledger (the model asked again) finds every write
// of the turn on Band: each is made once.
func TestBandsAgentAPIToolsFindALostWriteAgain(t *testing.T) {
	for _, ep := range []fakeband.Endpoint{fakeband.EndpointCreateMemory, fakeband.EndpointCreateTask, fakeband.EndpointUpdateTask} {
		t.Run(string(ep), func(t *testing.T) {
			w := newWorld(t)
			nth := 1
			if ep == fakeband.EndpointUpdateTask {
				nth = 2 // the comment
			}
			w.fb.Inject(fakeband.Fault{Endpoint: ep, Nth: nth, Kind: fakeband.LoseResponse})
			loop := &agentloop.Loop{Model: boardScript(), Tools: agentloop.BandTools()}
			w.serve(t, loop.Handler())
			msg := w.say(t, "please refund order-17")
			w.waitStatus(t, msg, fakeband.StatusProcessed)
			if got, want := w.boardWrites(t), wantBoardWrites(w, msg); !equal(got, want) {
				t.Errorf("writes in the fake's truth:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// A write the Message or Band refuses wrote nothing and is the model's
// to read: a blank subject, an update without a change, a task that does
// not exist.
func TestABandAgentAPIToolsRefusalIsTheModelsToRead(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolCreateTask, `{"subject":"  "}`),
			call(agentloop.ToolUpdateTask, `{"task":"1"}`),
			call(agentloop.ToolUpdateTask, `{"task":"#9","status":"completed"}`),
			call(agentloop.ToolStoreMemory, `{"content":"x","thought":"y","type":"iconic"}`),
		}},
		{Text: "ok"},
	}}
	loop := &agentloop.Loop{Model: m, Tools: agentloop.BandTools()}
	w.serve(t, loop.Handler())
	msg := w.say(t, "hi")
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	m.mu.Lock()
	results := m.seen[1].Turns[2:]
	m.mu.Unlock()
	for i, want := range []string{"subject is blank", "give a status", "Band refused it (404)", "Band refused it (422)"} {
		if !results[i].IsError || !strings.Contains(results[i].Text, want) {
			t.Errorf("result %d: %+v, want an error result saying %q", i, results[i], want)
		}
	}
	if n := len(w.fb.Tasks(w.room.ID)) + len(w.fb.Memories()); n != 0 {
		t.Errorf("%d writes in the fake's truth, want none", n)
	}
}

// The tools' keys are the calls' places under the message's key, so a
// first delivery writes each without reading Band for it: a request per
// write.
func TestAFirstDeliveryOfBandsToolsReadsNothingToGuardThem(t *testing.T) {
	w := newWorld(t)
	m := boardScript()
	m.steps[0].ToolCalls = append(m.steps[0].ToolCalls, call(agentloop.ToolSendEvent, `{"type":"thought","content":"on it"}`),
		call(agentloop.ToolSendMessage, `{"content":"on it"}`))
	loop := &agentloop.Loop{Model: m, Tools: agentloop.BandTools()}
	w.serve(t, loop.Handler())
	msg := w.say(t, "please refund order-17")
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	reqs := w.fb.Requests()
	for _, ep := range []fakeband.Endpoint{fakeband.EndpointContext, fakeband.EndpointMemories, fakeband.EndpointTasks, fakeband.EndpointTaskHistory} {
		if reqs[ep] != 0 {
			t.Errorf("%s: %d reads, want none", ep, reqs[ep])
		}
	}
	for ep, n := range map[fakeband.Endpoint]int{fakeband.EndpointCreateMemory: 1, fakeband.EndpointCreateTask: 1, fakeband.EndpointUpdateTask: 2,
		fakeband.EndpointPutBoard: 1, fakeband.EndpointEvent: 1, fakeband.EndpointPost: 2} {
		if reqs[ep] != n {
			t.Errorf("%s: %d requests, want %d", ep, reqs[ep], n)
		}
	}
}
