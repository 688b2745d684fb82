package fakeband_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The operations of an agent's memories and of a room's board: the writes
// band-once guards (a memory, a task, a comment) and the reads its guards
// find them again with.
var boardOperations = []string{
	"createAgentMemory", "listAgentMemories", "getAgentMemory", "supersedeAgentMemory", "archiveAgentMemory",
	"createChatTask", "listChatTasks", "getChatTask", "updateChatTask", "getChatTaskHistory", "getChatBoard", "putChatBoard",
}

// boardExceptions are the statuses the fake answers on these operations
// that the document does not list for them.
var boardExceptions = append(conformanceExceptions,
	exception{status: 403, body: "Error", why: "a human's key on an agent route: the fake refuses it with 403 forbidden " +
		"on every agent operation, as Band does (band-api.md §1.1); the memory reads, the create and the board operations list no 403",
		notFor: []string{"supersedeAgentMemory", "archiveAgentMemory", "getAgentMe", "listAgentChats", "getAgentNextMessage",
			"markAgentMessageProcessing", "markAgentMessageProcessed", "markAgentMessageFailed", "createAgentChatMessage",
			"getAgentChatContext", "createAgentChatEvent", "listAgentChatParticipants", "addAgentChatParticipant",
			"removeAgentChatParticipant", "listAgentPeers", "createAgentChat", "listAgentMessages", "reportAgentChatActivity"}},
	exception{op: "getAgentMemory", status: 403, body: "Error", why: "a human's key on an agent route"},
)

// Every answer of the memory, task and board endpoints, successes and
// every documented refusal, holds to Band's published OpenAPI document.
func TestMemoryTaskAndBoardEndpointsConformToBandsOpenAPIDocument(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	c := &conformance{doc: doc, router: router, client: f.c, exceptions: boardExceptions, seen: map[string]map[int]bool{}}
	const unknownID = "00000000-0000-4000-8000-000000000000"
	bot, alice := f.bot.Key, f.alice.Key
	chat := "/agent/chats/" + f.room.ID
	other := f.b.AddAgent("Other")
	memory := func(fields map[string]any) map[string]any {
		m := map[string]any{"content": "Alice prefers short answers", "system": "long_term", "type": "semantic",
			"segment": "user", "thought": "she said so", "scope": "subject", "subject_id": f.alice.ID,
			"metadata": map[string]any{"tags": []string{"style"}, "dedup_key": "k1"}}
		for k, v := range fields {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return map[string]any{"memory": m}
	}

	mem := f.do(t, http.MethodPost, "/agent/memories", bot, memory(nil)).data(t)["id"].(string)
	theirs := f.do(t, http.MethodPost, "/agent/memories", other.Key, memory(map[string]any{"scope": "organization", "subject_id": nil})).data(t)["id"].(string)
	task := f.do(t, http.MethodPost, chat+"/tasks", bot, map[string]any{"subject": "refund order-17"}).data(t)["id"].(string)
	for _, ex := range []exchange{
		{name: "store a memory", method: "POST", path: "/agent/memories", key: bot, body: memory(nil), status: 201},
		{name: "store an organization memory", method: "POST", path: "/agent/memories", key: bot, status: 201,
			body: memory(map[string]any{"scope": "organization", "subject_id": nil, "metadata": nil})},
		{name: "store, blank content", method: "POST", path: "/agent/memories", key: bot, body: memory(map[string]any{"content": " "}), status: 422},
		{name: "store, type not of the system", method: "POST", path: "/agent/memories", key: bot, body: memory(map[string]any{"type": "iconic"}), status: 422},
		{name: "store, subject scope without a subject", method: "POST", path: "/agent/memories", key: bot, body: memory(map[string]any{"subject_id": nil}), status: 422},
		{name: "store, no memory", method: "POST", path: "/agent/memories", key: bot, body: map[string]any{}, status: 422, offDocument: "memory is required"},
		{name: "memories", method: "GET", path: "/agent/memories", key: bot, status: 200},
		{name: "memories, a cursor page", method: "GET", path: "/agent/memories?limit=1&subject_id=" + f.alice.ID, key: bot, status: 200},
		{name: "memories, every status", method: "GET", path: "/agent/memories?status=all&scope=all", key: bot, status: 200},
		{name: "memories, deprecated paging", method: "GET", path: "/agent/memories?page=1&page_size=2", key: bot, status: 200},
		{name: "memories, bad cursor", method: "GET", path: "/agent/memories?cursor=nonsense", key: bot, status: 422},
		{name: "memories, limit over 50", method: "GET", path: "/agent/memories?limit=51", key: bot, status: 422},
		{name: "a memory", method: "GET", path: "/agent/memories/" + mem, key: bot, status: 200},
		{name: "an unknown memory", method: "GET", path: "/agent/memories/" + unknownID, key: bot, status: 404},
		{name: "supersede", method: "POST", path: "/agent/memories/" + mem + "/supersede", key: bot, status: 200},
		{name: "supersede again", method: "POST", path: "/agent/memories/" + mem + "/supersede", key: bot, status: 200},
		{name: "supersede another agent's", method: "POST", path: "/agent/memories/" + theirs + "/supersede", key: bot, status: 403},
		{name: "supersede an unknown memory", method: "POST", path: "/agent/memories/" + unknownID + "/supersede", key: bot, status: 404},
		{name: "archive", method: "POST", path: "/agent/memories/" + mem + "/archive", key: bot, status: 200},
		{name: "archive another agent's", method: "POST", path: "/agent/memories/" + theirs + "/archive", key: bot, status: 403},
		{name: "archive an unknown memory", method: "POST", path: "/agent/memories/" + unknownID + "/archive", key: bot, status: 404},

		{name: "create a task", method: "POST", path: chat + "/tasks", key: bot, body: map[string]any{"subject": "ask bea", "detail": "confirm the refund"}, status: 201},
		{name: "create a superseding task", method: "POST", path: chat + "/tasks", key: bot, body: map[string]any{"subject": "ask bea again", "supersedes_id": "2"}, status: 201},
		{name: "create, blank subject", method: "POST", path: chat + "/tasks", key: bot, body: map[string]any{"subject": " "}, status: 422},
		{name: "create in an unknown room", method: "POST", path: "/agent/chats/" + unknownID + "/tasks", key: bot, body: map[string]any{"subject": "x"}, status: 404},
		{name: "tasks", method: "GET", path: chat + "/tasks", key: bot, status: 200},
		{name: "tasks, every state, a page", method: "GET", path: chat + "/tasks?state=all&limit=1", key: bot, status: 200},
		{name: "tasks, unknown state", method: "GET", path: chat + "/tasks?state=lost", key: bot, status: 422, offDocument: "state is an enum"},
		{name: "tasks of an unknown room", method: "GET", path: "/agent/chats/" + unknownID + "/tasks", key: bot, status: 404},
		{name: "a task", method: "GET", path: chat + "/tasks/" + task, key: bot, status: 200},
		{name: "a task by number, with history", method: "GET", path: chat + "/tasks/1?include=history", key: bot, status: 200},
		{name: "an unknown task", method: "GET", path: chat + "/tasks/" + unknownID, key: bot, status: 404},
		{name: "join with a status", method: "POST", path: chat + "/tasks/" + task, key: bot, body: map[string]any{"status": "in_progress", "active_form": "refunding", "linked_native_id": "step-1"}, status: 200},
		{name: "comment", method: "POST", path: chat + "/tasks/" + task, key: bot, body: map[string]any{"comment": "refunded"}, status: 200},
		{name: "finish and tidy", method: "POST", path: chat + "/tasks/" + task, key: bot, body: map[string]any{"status": "completed", "state": "archived"}, status: 200},
		{name: "work on an archived task", method: "POST", path: chat + "/tasks/" + task, key: bot, body: map[string]any{"comment": "late"}, status: 422},
		{name: "update, nothing", method: "POST", path: chat + "/tasks/" + task, key: bot, body: map[string]any{}, status: 422},
		{name: "update an unknown task", method: "POST", path: chat + "/tasks/" + unknownID, key: bot, body: map[string]any{"comment": "x"}, status: 404},
		{name: "history", method: "GET", path: chat + "/tasks/" + task + "/history", key: bot, status: 200},
		{name: "history, a page", method: "GET", path: chat + "/tasks/" + task + "/history?limit=1", key: bot, status: 200},
		{name: "history, bad cursor", method: "GET", path: chat + "/tasks/" + task + "/history?cursor=nonsense", key: bot, status: 422},
		{name: "history of an unknown task", method: "GET", path: chat + "/tasks/" + unknownID + "/history", key: bot, status: 404},
		{name: "board, no goal yet", method: "GET", path: chat + "/board", key: bot, status: 200},
		{name: "set the goal", method: "PUT", path: chat + "/board", key: bot, body: map[string]any{"goal_title": "refunds", "goal_summary": "refund what is asked"}, status: 200},
		{name: "set the goal again", method: "PUT", path: chat + "/board", key: bot, body: map[string]any{"goal_title": "refunds"}, status: 200},
		{name: "set nothing", method: "PUT", path: chat + "/board", key: bot, body: map[string]any{}, status: 422},
		{name: "board with history", method: "GET", path: chat + "/board?include=history", key: bot, status: 200},
		{name: "board of an unknown room", method: "GET", path: "/agent/chats/" + unknownID + "/board", key: bot, status: 404},
		{name: "set the goal of an unknown room", method: "PUT", path: "/agent/chats/" + unknownID + "/board", key: bot, body: map[string]any{"goal_title": "x"}, status: 404},
	} {
		c.check(t, ex)
	}

	for _, call := range []exchange{
		{name: "store a memory", method: "POST", path: "/agent/memories", body: memory(nil)},
		{name: "memories", method: "GET", path: "/agent/memories"},
		{name: "a memory", method: "GET", path: "/agent/memories/" + mem},
		{name: "supersede", method: "POST", path: "/agent/memories/" + mem + "/supersede"},
		{name: "archive", method: "POST", path: "/agent/memories/" + mem + "/archive"},
		{name: "create a task", method: "POST", path: chat + "/tasks", body: map[string]any{"subject": "x"}},
		{name: "tasks", method: "GET", path: chat + "/tasks"},
		{name: "a task", method: "GET", path: chat + "/tasks/" + task},
		{name: "update a task", method: "POST", path: chat + "/tasks/" + task, body: map[string]any{"state": "active"}},
		{name: "history", method: "GET", path: chat + "/tasks/" + task + "/history"},
		{name: "board", method: "GET", path: chat + "/board"},
		{name: "set the goal", method: "PUT", path: chat + "/board", body: map[string]any{"goal_title": "x"}},
	} {
		noKey, wrongKey, human := call, call, call
		noKey.name, noKey.status, noKey.offDocument = call.name+" without a key", 401, "X-API-Key is a required header"
		wrongKey.name, wrongKey.key, wrongKey.status = call.name+" with an unknown key", "band_a_nonsense", 401
		human.name, human.key, human.status = call.name+" with a human's key", alice, 403
		c.check(t, noKey)
		c.check(t, wrongKey)
		c.check(t, human)
		f.b.Inject(fakeband.Fault{Nth: 1, Kind: fakeband.FailBefore})
		busy := call
		busy.name, busy.key, busy.status = call.name+" unavailable", bot, 503
		c.check(t, busy)
		f.b.ClearFaults()
	}
	c.requireEveryDocumentedStatus(t, boardOperations)
	for _, op := range boardOperations {
		assert.Contains(t, c.seen, op, "operation %s was exercised", op)
	}

	// The truth holds each write once per request that applied it.
	require.Len(t, f.b.Memories(), 4, "four memories stored")
	tasks := f.b.Tasks(f.room.ID)
	require.Len(t, tasks, 3, "three tasks created, one superseded by the last")
	assert.Equal(t, "superseded", tasks[1].State)
	assert.Equal(t, []fakeband.TaskComment{{Seq: tasks[0].Comments[0].Seq, AuthorID: f.bot.ID, Text: "refunded"}}, tasks[0].Comments)
	bd, ok := f.b.RoomBoard(f.room.ID)
	require.True(t, ok)
	assert.Equal(t, fakeband.Board{GoalTitle: "refunds", GoalSummary: "refund what is asked", Changes: 1}, bd, "setting the same goal again changed nothing")
}
