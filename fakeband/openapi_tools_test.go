package fakeband_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The operations an agent's tools call beside the message lifecycle:
// events, participants, peers, room creation, the status listing and the
// working indicator.
var toolOperations = []string{
	"createAgentChatEvent", "listAgentChatParticipants", "addAgentChatParticipant", "removeAgentChatParticipant",
	"listAgentPeers", "createAgentChat", "listAgentMessages", "reportAgentChatActivity",
}

// Every answer of the tool endpoints, successes and every documented
// refusal, holds to Band's published OpenAPI document.
func TestToolEndpointsConformToBandsOpenAPIDocument(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	c := &conformance{doc: doc, router: router, client: f.c, exceptions: conformanceExceptions, seen: map[string]map[int]bool{}}
	const unknownID = "00000000-0000-4000-8000-000000000000"
	bot, alice := f.bot.Key, f.alice.Key
	chat := "/agent/chats/" + f.room.ID
	sibling := f.b.AddAgent("Sibling")
	carol := f.b.AddHuman("Carol")
	owner := f.b.Owner()
	thought := map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}}
	toolCall := map[string]any{"event": map[string]any{"content": "calling", "message_type": "tool_call",
		"metadata": map[string]any{"function": map[string]any{"name": "lookup", "arguments": "{}"}, "id": "call-1", "type": "function"}}}
	add := func(id string) map[string]any {
		return map[string]any{"participant": map[string]any{"participant_id": id}}
	}
	first := f.say(t, "first")

	for _, ex := range []exchange{
		{name: "event", method: "POST", path: chat + "/events", key: bot, body: thought, status: 201},
		{name: "event with metadata", method: "POST", path: chat + "/events", key: bot, body: toolCall, status: 201},
		{name: "attention event", method: "POST", path: chat + "/events", key: bot, status: 201,
			body: map[string]any{"event": map[string]any{"content": "may I?", "message_type": "attention", "metadata": map[string]any{"kind": "question", "blocking": true}}}},
		{name: "event, blank content", method: "POST", path: chat + "/events", key: bot, status: 422,
			body: map[string]any{"event": map[string]any{"content": " ", "message_type": "thought"}}},
		{name: "event, unknown type", method: "POST", path: chat + "/events", key: bot, status: 422, offDocument: "message_type is an enum",
			body: map[string]any{"event": map[string]any{"content": "x", "message_type": "text"}}},
		{name: "attention without kind", method: "POST", path: chat + "/events", key: bot, status: 422,
			body: map[string]any{"event": map[string]any{"content": "x", "message_type": "attention"}}},
		{name: "event, metadata not an object", method: "POST", path: chat + "/events", key: bot, status: 422, offDocument: "metadata is an object or null",
			body: map[string]any{"event": map[string]any{"content": "x", "message_type": "thought", "metadata": []int{1}}}},
		{name: "event, no event", method: "POST", path: chat + "/events", key: bot, body: map[string]any{}, status: 422, offDocument: "event is required"},
		{name: "event in an unknown room", method: "POST", path: "/agent/chats/" + unknownID + "/events", key: bot, body: thought, status: 404},

		{name: "participants", method: "GET", path: chat + "/participants", key: bot, status: 200},
		{name: "participants of an unknown room", method: "GET", path: "/agent/chats/" + unknownID + "/participants", key: bot, status: 404},
		{name: "add a sibling agent", method: "POST", path: chat + "/participants", key: bot, body: add(sibling.ID), status: 201},
		{name: "add the owner as admin", method: "POST", path: chat + "/participants", key: bot, status: 201,
			body: map[string]any{"participant": map[string]any{"participant_id": owner.ID, "role": "admin"}}},
		{name: "add someone already in", method: "POST", path: chat + "/participants", key: bot, body: add(sibling.ID), status: 422},
		{name: "add a human not the owner", method: "POST", path: chat + "/participants", key: bot, body: add(carol.ID), status: 403},
		{name: "add an unknown participant", method: "POST", path: chat + "/participants", key: bot, body: add(unknownID), status: 404},
		{name: "add, id no UUID", method: "POST", path: chat + "/participants", key: bot, body: add("nobody"), status: 422, offDocument: "participant_id is a uuid"},
		{name: "add to an unknown room", method: "POST", path: "/agent/chats/" + unknownID + "/participants", key: bot, body: add(sibling.ID), status: 404},
		{name: "remove as a mere member", method: "DELETE", path: chat + "/participants/" + sibling.ID, key: bot, status: 403},

		{name: "peers", method: "GET", path: "/agent/peers", key: bot, status: 200},
		{name: "peers not in the room", method: "GET", path: "/agent/peers?not_in_chat=" + f.room.ID + "&page=1&page_size=10", key: bot, status: 200},
		{name: "peers, page_size over 100", method: "GET", path: "/agent/peers?page_size=101", key: bot, status: 422},

		{name: "create a room", method: "POST", path: "/agent/chats", key: bot, body: map[string]any{"chat": map[string]any{"title": "side"}}, status: 201},
		{name: "create an untitled room", method: "POST", path: "/agent/chats", key: bot, body: map[string]any{"chat": map[string]any{}}, status: 201},
		{name: "create, title with a newline", method: "POST", path: "/agent/chats", key: bot, body: map[string]any{"chat": map[string]any{"title": "a\nb"}}, status: 422},
		{name: "create, no chat", method: "POST", path: "/agent/chats", key: bot, body: map[string]any{}, status: 422, offDocument: "chat is required"},

		{name: "messages, default filter", method: "GET", path: chat + "/messages", key: bot, status: 200},
		{name: "messages, status=pending", method: "GET", path: chat + "/messages?status=pending", key: bot, status: 200},
		{name: "messages, status=all, deprecated paging", method: "GET", path: chat + "/messages?status=all&page=1&page_size=1", key: bot, status: 200},
		{name: "messages, unknown status", method: "GET", path: chat + "/messages?status=lost", key: bot, status: 422, offDocument: "status is an enum"},
		{name: "messages, bad cursor", method: "GET", path: chat + "/messages?cursor=nonsense", key: bot, status: 422},
		{name: "messages of an unknown room", method: "GET", path: "/agent/chats/" + unknownID + "/messages", key: bot, status: 404},

		{name: "activity", method: "POST", path: chat + "/activity", key: bot, body: map[string]any{"working": true}, status: 200},
		{name: "activity off", method: "POST", path: chat + "/activity", key: bot, body: map[string]any{"working": false}, status: 200},
		{name: "activity, no working", method: "POST", path: chat + "/activity", key: bot, body: map[string]any{}, status: 422, offDocument: "working is required"},
		{name: "activity in an unknown room", method: "POST", path: "/agent/chats/" + unknownID + "/activity", key: bot, body: map[string]any{"working": true}, status: 404},

		{name: "context, deprecated paging", method: "GET", path: chat + "/context?page=1&page_size=2", key: bot, status: 200},
	} {
		c.check(t, ex)
	}

	// The room the agent owns: it may remove, never its only owner.
	own := f.do(t, http.MethodPost, "/agent/chats", bot, map[string]any{"chat": map[string]any{"title": "mine"}}).data(t)["id"].(string)
	mine := "/agent/chats/" + own
	c.check(t, exchange{name: "add to its own room", method: "POST", path: mine + "/participants", key: bot, body: add(sibling.ID), status: 201})
	c.check(t, exchange{name: "remove as owner", method: "DELETE", path: mine + "/participants/" + sibling.ID, key: bot, status: 200})
	c.check(t, exchange{name: "remove someone not in", method: "DELETE", path: mine + "/participants/" + sibling.ID, key: bot, status: 404})
	c.check(t, exchange{name: "remove the only owner", method: "DELETE", path: mine + "/participants/" + f.bot.ID, key: bot, status: 403})
	c.check(t, exchange{name: "remove in an unknown room", method: "DELETE", path: "/agent/chats/" + unknownID + "/participants/" + sibling.ID, key: bot, status: 404})

	// Processing and stopped: the status filters, and events refused.
	f.mark(t, first, "processing", nil)
	c.check(t, exchange{name: "messages, status=processing", method: "GET", path: chat + "/messages?status=processing&page=1", key: bot, status: 200})
	require.NoError(t, f.b.StopRoom(f.room.ID))
	c.check(t, exchange{name: "event while stopped", method: "POST", path: chat + "/events", key: bot, body: thought, status: 403})
	require.NoError(t, f.b.PlayRoom(f.room.ID))

	// Plan quota: Band's limit_reached on each create the document lists it for.
	for _, q := range []quotaExchange{
		{exchange{name: "event", method: "POST", path: chat + "/events", body: thought}, fakeband.EndpointEvent},
		{exchange{name: "add participant", method: "POST", path: mine + "/participants", body: add(owner.ID)}, fakeband.EndpointAddParticipant},
		{exchange{name: "create room", method: "POST", path: "/agent/chats", body: map[string]any{"chat": map[string]any{}}}, fakeband.EndpointCreateChat},
	} {
		quota := fakeband.Fault{Endpoint: q.ep, Nth: 1, Kind: fakeband.FailBefore, Status: 403, Code: "limit_reached"}
		f.b.Inject(quota)
		r := f.do(t, q.method, q.path, bot, q.body)
		f.b.ClearFaults()
		require.Equal(t, 403, r.status, q.name)
		assert.Equal(t, "limit_reached", r.errorCode(t), q.name)
		f.b.Inject(quota)
		ex := q.exchange
		ex.name, ex.key, ex.status = q.name+" over the plan's quota", bot, 403
		c.check(t, ex)
		f.b.ClearFaults()
	}

	// Every operation: no key, a wrong key, a human's key, and the faults.
	for _, call := range []exchange{
		{name: "event", method: "POST", path: chat + "/events", body: thought},
		{name: "participants", method: "GET", path: chat + "/participants"},
		{name: "add participant", method: "POST", path: chat + "/participants", body: add(sibling.ID)},
		{name: "remove participant", method: "DELETE", path: chat + "/participants/" + sibling.ID},
		{name: "peers", method: "GET", path: "/agent/peers"},
		{name: "create room", method: "POST", path: "/agent/chats", body: map[string]any{"chat": map[string]any{}}},
		{name: "messages", method: "GET", path: chat + "/messages"},
		{name: "activity", method: "POST", path: chat + "/activity", body: map[string]any{"working": true}},
	} {
		noKey, wrongKey, human := call, call, call
		noKey.name, noKey.status, noKey.offDocument = call.name+" without a key", 401, "X-API-Key is a required header"
		wrongKey.name, wrongKey.key, wrongKey.status = call.name+" with an unknown key", "band_a_nonsense", 401
		human.name, human.key, human.status = call.name+" with a human's key", alice, 403
		c.check(t, noKey)
		c.check(t, wrongKey)
		c.check(t, human)
		for _, fault := range []struct {
			f      fakeband.Fault
			status int
		}{
			{fakeband.Fault{Nth: 1, Kind: fakeband.FailBefore, Status: 429, EmptyBody: true}, 429},
			{fakeband.Fault{Nth: 1, Kind: fakeband.FailBefore}, 503},
		} {
			f.b.Inject(fault.f)
			faulted := call
			faulted.name, faulted.key, faulted.status = call.name+" faulted", bot, fault.status
			c.check(t, faulted)
			f.b.ClearFaults()
		}
	}
	c.requireEveryDocumentedStatus(t, toolOperations)
}

// quotaExchange is an exchange with the endpoint its quota fault names.
type quotaExchange struct {
	exchange
	ep fakeband.Endpoint
}
