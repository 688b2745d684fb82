package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/examplekit"
	"github.com/band-once/bandonce/internal/killtest"
)

// turnRun is one refund request served by the agent process, killed at
// request at of its turn (never, for at 0), then restarted.
type turnRun struct {
	band     *fakeband.Band
	agent    fakeband.Agent
	ada      fakeband.Human
	room     fakeband.Room
	msg      string
	past     past
	payments *examplekit.PaymentsServer
	proxy    *killtest.Proxy
}

func runTurn(t *testing.T, bin string, at int, after bool, ledger string) *turnRun {
	t.Helper()
	stage := examplekit.NewStage(11, "refunds", "ada", "bea")
	t.Cleanup(stage.Close)
	fb, agent, ada, room := stage.Band, stage.Agent, stage.Humans[0], stage.Room
	base, err := fb.Listen("127.0.0.1:0")
	require.NoError(t, err)
	past, err := seedPast(t.Context(), stage)
	require.NoError(t, err)
	msg, err := fb.Say(room.ID, ada.ID, "please refund order-17", agent.ID)
	require.NoError(t, err)

	proxy, front, env := killtest.Front(t, base, agent.Key, msg, at, after, func(method, path string) bool {
		// The turn's room (its participants too), the memories, the
		// contacts and the peers (the agent's own), and the rooms it
		// creates.
		return strings.Contains(path, "/chats/"+room.ID+"/") || strings.Contains(path, "/agent/memories") ||
			strings.Contains(path, "/agent/contacts") || strings.HasSuffix(path, "/agent/peers") ||
			(method == http.MethodPost && strings.HasSuffix(path, "/agent/chats"))
	}, killtest.Upstream{Prefix: "/pay", Target: stage.PaymentsURL})
	env = append(env, "TOOLS_PAYMENTS_URL="+front+"/pay", "TOOLS_BILLING="+past.Billing, "TOOLS_RETIRED="+past.Retired)
	if ledger != "" {
		env = append(env, "TOOLS_LEDGER="+ledger)
	}
	killtest.Serve(t, bin, env, proxy, "tools: serving", func() bool { return fb.Status(agent.ID, msg) == fakeband.StatusProcessed })
	return &turnRun{band: fb, agent: agent, ada: ada, room: room, msg: msg, past: past, payments: stage.Payments, proxy: proxy}
}

// check asserts that every effect of the turn happened once.
func (r *turnRun) check(t *testing.T) {
	t.Helper()
	keys := map[string]int{}
	for _, p := range r.band.Posts(r.room.ID) {
		if p.SenderID != r.agent.ID {
			continue
		}
		lines := strings.Split(p.Content, "\n")
		keys[lines[len(lines)-1]]++
	}
	prefix := "msg:" + r.msg
	assert.Equal(t, map[string]int{"[dedup_key:" + prefix + ":send:1]": 1, "[dedup_key:" + prefix + "]": 1}, keys, "the question and the reply, once each")
	events := map[string]int{}
	for _, e := range r.band.ChatEvents(r.room.ID) {
		var meta map[string]any
		require.NoError(t, json.Unmarshal(e.Metadata, &meta))
		events[fmt.Sprintf("%s %v", e.MessageType, meta["dedup_key"])]++
	}
	assert.Equal(t, map[string]int{
		"thought " + prefix + ":event:1":     1,
		"tool_call " + prefix + ":event:2":   1,
		"tool_result " + prefix + ":event:3": 1,
	}, events, "each event once")
	tasks := r.band.Tasks(r.room.ID)
	require.Len(t, tasks, 1, "one task on the board")
	assert.True(t, strings.HasSuffix(tasks[0].Detail, "[dedup_key:"+prefix+":task:1]"), tasks[0].Detail)
	require.Len(t, tasks[0].Comments, 1, "one comment on it")
	assert.True(t, strings.HasSuffix(tasks[0].Comments[0].Text, "[dedup_key:"+prefix+":comment:1]"), tasks[0].Comments[0].Text)
	assert.Equal(t, []fakeband.TaskAssignment{{AssigneeID: r.agent.ID, Status: "completed", ActiveForm: "refunding order-17"}}, tasks[0].Assignments)
	memories := r.band.Memories()
	require.Len(t, memories, 3, "the two memories of the past and one new")
	var meta map[string]any
	require.NoError(t, json.Unmarshal(memories[2].Metadata, &meta))
	assert.Equal(t, prefix+":memory:1", meta["dedup_key"])
	assert.Equal(t, []string{"superseded", "archived", "active"}, []string{memories[0].Status, memories[1].Status, memories[2].Status},
		"the wrong fact superseded, the stale note archived, the new memory active")
	// What changed state did so once: a repeat (a redelivery replaying
	// the journaled choice) leaves Band as one call does.
	changes := map[string]int{}
	team := func(id string) bool { return id == r.past.billing.ID || id == r.past.retired.ID }
	for _, e := range r.band.Events() {
		switch {
		case e.Kind == fakeband.EventMemoryStatus:
			changes["memory "+e.Detail]++
		case e.Kind == fakeband.EventContactRequest && e.AgentID == r.agent.ID && strings.HasSuffix(e.Detail, " approved"):
			changes["approved a request"]++
		case e.Kind == fakeband.EventContactAdded && e.AgentID == r.agent.ID:
			changes["contact added "+e.Detail]++
		case e.Kind == fakeband.EventContactRemoved && e.AgentID == r.agent.ID:
			changes["contact removed "+e.Detail]++
		case e.Kind == fakeband.EventJoin && e.RoomID == r.room.ID && team(e.AgentID):
			changes["joined the room "+e.AgentID]++
		case e.Kind == fakeband.EventLeave && e.RoomID == r.room.ID && team(e.AgentID):
			changes["left the room "+e.AgentID]++
		}
	}
	assert.Equal(t, map[string]int{
		"memory " + memories[0].ID + " superseded": 1,
		"memory " + memories[1].ID + " archived":   1,
		"approved a request":                       1,
		"contact added " + r.past.retired.ID:       1, // the past's
		"contact added " + r.past.billing.ID:       1,
		"contact removed " + r.past.retired.ID:     1,
		"joined the room " + r.past.retired.ID:     1, // the past's
		"joined the room " + r.past.billing.ID:     1,
		"left the room " + r.past.retired.ID:       1,
	}, changes, "each change of state once")
	var members []string
	for _, p := range r.band.Members(r.room.ID) {
		members = append(members, p.Name+" "+p.Role)
	}
	assert.Equal(t, []string{"ada owner", "bea member", "refunds admin", "billing member"}, members, "billing in the room in billing-v1's place")
	bd, ok := r.band.RoomBoard(r.room.ID)
	assert.True(t, ok, "the room's goal is set")
	assert.Equal(t, fakeband.Board{GoalTitle: "Refunds", GoalSummary: "Refund what the room asks for, once each.", Changes: 1}, bd, "the goal set once")
	created := r.band.CreatedRooms()
	if assert.Len(t, created, 1, "one follow-up room") {
		assert.Regexp(t, `^Refund order-17: follow-up \[bo:[0-9a-f]{12}\]$`, created[0].Title)
	}
	asked := 0
	for _, e := range r.band.Events() {
		if e.Kind == fakeband.EventContactRequest && e.AgentID == r.agent.ID && !strings.Contains(e.Detail, " ") { // sent, not answered
			assert.Equal(t, r.ada.ID, e.Detail, "the contact request goes to the sender")
			asked++
		}
	}
	assert.Equal(t, 1, asked, "one contact request")
	assert.Equal(t, map[string]int{"order-17": 1}, r.payments.Refunds(), "one refund")
	assert.Len(t, r.payments.Calls(), 1, "one idempotency key at every delivery")
}

// The agent as users run it: a separate process, SIGKILLed at every
// request boundary of one turn in turn (before the request and after Band
// or the payment API applied it), restarted each time. Every send and
// event of the turn is in the fake's truth once, billing joined the room
// once and billing-v1 left it once, and the payment API saw one
// idempotency key and refunded once.
func TestToolsProcessSurvivesSIGKILLAtEveryRequestOfATurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process, dozens of times")
	}
	bin := killtest.Build(t, "tools")
	dry := runTurn(t, bin, 0, false, "")
	dry.check(t)
	turn := dry.proxy.Requests()
	t.Logf("the turn's requests: %s", strings.Join(turn, ", "))
	require.GreaterOrEqual(t, len(turn), 25, "processing, the task, its status, 3 events, the refund, the task's completion, the memory, "+
		"the memories read, the supersede, the archive, the contact request answered, the contact removed, "+
		"participants, peers, billing added, billing-v1 removed, "+
		"the goal, the follow-up room, participants, the contact request, the question, the reply, processed")
	for _, ledger := range []string{"memory", "bolt"} {
		for at := 1; at <= len(turn); at++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s ledger, kill at %d (%s), after=%v", ledger, at, turn[at-1], after), func(t *testing.T) {
					path := ""
					if ledger == "bolt" {
						path = filepath.Join(t.TempDir(), "agent.ledger")
					}
					r := runTurn(t, bin, at, after, path)
					killed, seen := r.proxy.Killed()
					require.True(t, killed, "the agent was killed at the turn's request %d", at)
					require.Equal(t, at, seen, "the kill came at the turn's request %d", at)
					r.check(t)
					t.Logf("room reads after the restart: %d", r.band.Requests()[fakeband.EndpointContext])
					if ledger == "bolt" && !(after && strings.Contains(turn[at-1], "refunds")) {
						// Only a kill between the refund and its record
						// makes the step call the API again.
						for key, n := range r.payments.Calls() {
							assert.Equal(t, 1, n, "the journal kept the step from running again (%s)", key)
						}
					}
				})
			}
		}
	}
}

// -fake plays the scripted request and prints the room.
func TestFakeModePrintsTheTurn(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runFake(t.Context(), &out, slog.New(slog.DiscardHandler))) // nil would be slog.Default()
	text := out.String()
	for _, want := range []string{"[thought]", "[tool_call] refund(order-17)", "[tool_result] refunded order-17", "Could you confirm refund", "Refunded order-17", "payments: order-17 refunded 1 time(s)",
		"board:   #1 Refund order-17 [completed]", "room:    support: ada (owner), bea (member), refunds (admin), billing (member)", "refunds: Refunded order-17, receipt", "memory:  about ada [active]: Asked for a refund of order-17",
		"memory:  about ada [superseded]: order-17 may not be refunded", "memory:  about ada [archived]: ada waits for a decision on order-17",
		"contact: refunds answered a request: approved", "contact: refunds removed billing-v1",
		"goal:    Refunds: Refund what the room asks for, once each.", `room:    refunds opened "Refund order-17: follow-up [bo:`, "contact: refunds asked ada"} {
		assert.Contains(t, text, want)
	}
}
