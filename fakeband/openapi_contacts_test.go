package fakeband_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The agent's contact operations.
var contactOperations = []string{
	"listAgentContacts", "addAgentContact", "removeAgentContact", "listAgentContactRequests", "respondToAgentContactRequest",
}

var contactExceptions = append(conformanceExceptions,
	exception{status: 403, body: "Error", why: "a human's key on an agent route: 403 forbidden on every agent operation " +
		"(band-api.md §1.1); only the respond operation lists it",
		notFor: append([]string{"respondToAgentContactRequest", "getAgentMe", "listAgentChats", "getAgentNextMessage",
			"markAgentMessageProcessing", "markAgentMessageProcessed", "markAgentMessageFailed", "createAgentChatMessage",
			"getAgentChatContext", "createAgentChatEvent", "listAgentChatParticipants", "addAgentChatParticipant",
			"removeAgentChatParticipant", "listAgentPeers", "createAgentChat", "listAgentMessages", "reportAgentChatActivity"}, boardOperations...)},
	exception{op: "listAgentContactRequests", status: 422, body: "Error", why: "the fake refuses a sent_status outside its enum, " +
		"or a page or page_size out of 1..100, rather than guess"},
	exception{op: "listAgentContacts", status: 422, body: "Error", why: "a page or page_size out of 1..100"},
)

// Every answer of the contact endpoints, successes and every documented
// refusal, holds to Band's published OpenAPI document; the truth and the
// socket see what was applied.
func TestContactEndpointsConformToBandsOpenAPIDocument(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	c := &conformance{doc: doc, router: router, client: f.c, exceptions: contactExceptions, seen: map[string]map[int]bool{}}
	bot, alice := f.bot.Key, f.alice.Key
	peer := f.b.AddAgent("Peer")
	carol := f.b.AddHuman("Carol")
	for _, ex := range []exchange{
		{name: "contacts, none yet", method: "GET", path: "/agent/contacts", key: bot, status: 200},
		{name: "add a peer", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{"handle": peer.Handle, "message": "hi"}, status: 201},
		{name: "add it again while pending", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{"handle": peer.Handle}, status: 409},
		{name: "add an unknown handle", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{"handle": "nobody"}, status: 404},
		{name: "add without a handle", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{}, status: 400, offDocument: "handle is required"},
		{name: "requests", method: "GET", path: "/agent/contacts/requests", key: bot, status: 200},
		{name: "requests, every sent status", method: "GET", path: "/agent/contacts/requests?sent_status=all&page=1&page_size=10", key: bot, status: 200},
		{name: "the peer approves", method: "POST", path: "/agent/contacts/requests/respond", key: peer.Key, body: map[string]any{"action": "approve", "handle": f.bot.Handle}, status: 200},
		{name: "approve again", method: "POST", path: "/agent/contacts/requests/respond", key: peer.Key, body: map[string]any{"action": "approve", "handle": f.bot.Handle}, status: 409},
		{name: "respond to nothing", method: "POST", path: "/agent/contacts/requests/respond", key: bot, body: map[string]any{"action": "reject", "handle": carol.Handle}, status: 404},
		{name: "respond without an action", method: "POST", path: "/agent/contacts/requests/respond", key: bot, body: map[string]any{"handle": carol.Handle}, status: 400, offDocument: "action is required"},
		{name: "add a contact", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{"handle": peer.Handle}, status: 409},
		{name: "contacts", method: "GET", path: "/agent/contacts", key: bot, status: 200},
		{name: "remove", method: "POST", path: "/agent/contacts/remove", key: bot, body: map[string]any{"handle": peer.Handle}, status: 200},
		{name: "remove again", method: "POST", path: "/agent/contacts/remove", key: bot, body: map[string]any{"handle": peer.Handle}, status: 404},
		{name: "remove, no one named", method: "POST", path: "/agent/contacts/remove", key: bot, body: map[string]any{}, status: 400},
		{name: "add carol", method: "POST", path: "/agent/contacts/add", key: bot, body: map[string]any{"handle": carol.Handle}, status: 201},
		{name: "cancel it", method: "POST", path: "/agent/contacts/requests/respond", key: bot, body: map[string]any{"action": "cancel", "handle": carol.Handle}, status: 200},
	} {
		c.check(t, ex)
	}
	for _, call := range []exchange{
		{name: "contacts", method: "GET", path: "/agent/contacts"},
		{name: "add", method: "POST", path: "/agent/contacts/add", body: map[string]any{"handle": peer.Handle}},
		{name: "remove", method: "POST", path: "/agent/contacts/remove", body: map[string]any{"handle": peer.Handle}},
		{name: "requests", method: "GET", path: "/agent/contacts/requests"},
		{name: "respond", method: "POST", path: "/agent/contacts/requests/respond", body: map[string]any{"action": "approve", "handle": peer.Handle}},
	} {
		noKey, wrongKey, human := call, call, call
		noKey.name, noKey.status, noKey.offDocument = call.name+" without a key", 401, "X-API-Key is a required header"
		wrongKey.name, wrongKey.key, wrongKey.status = call.name+" with an unknown key", "band_a_nonsense", 401
		human.name, human.key, human.status = call.name+" with a human's key", alice, 403
		c.check(t, noKey)
		c.check(t, wrongKey)
		c.check(t, human)
	}
	c.requireEveryDocumentedStatus(t, contactOperations)

	kinds := map[string]int{}
	for _, e := range f.b.Events() {
		kinds[e.Kind]++
	}
	assert.Equal(t, 2, kinds[fakeband.EventContactAdded], "the approval made both agents contacts")
	assert.Equal(t, 2, kinds[fakeband.EventContactRemoved], "the removal ended both directions")
	require.Equal(t, 4, kinds[fakeband.EventContactRequest], "two requests sent, one approved, one cancelled")
}

// The operations on one room of the agent's, beyond its messages.
var roomOperations = []string{"getAgentChat", "renameAgentChat"}

// A room read and renamed by the agent: every documented status.
func TestRoomReadAndRenameConformToBandsOpenAPIDocument(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	c := &conformance{doc: doc, router: router, client: f.c, exceptions: conformanceExceptions, seen: map[string]map[int]bool{}}
	const unknownID = "00000000-0000-4000-8000-000000000000"
	bot, alice := f.bot.Key, f.alice.Key
	own := f.do(t, "POST", "/agent/chats", bot, map[string]any{"chat": map[string]any{"title": "mine"}}).data(t)["id"].(string)
	rename := func(title string) map[string]any { return map[string]any{"chat": map[string]any{"title": title}} }
	for _, ex := range []exchange{
		{name: "a room", method: "GET", path: "/agent/chats/" + f.room.ID, key: bot, status: 200},
		{name: "an unknown room", method: "GET", path: "/agent/chats/" + unknownID, key: bot, status: 404},
		{name: "a room with a human's key", method: "GET", path: "/agent/chats/" + f.room.ID, key: alice, status: 403},
		{name: "a room without a key", method: "GET", path: "/agent/chats/" + f.room.ID, status: 401, offDocument: "X-API-Key is a required header"},
		{name: "rename its own room", method: "PATCH", path: "/agent/chats/" + own, key: bot, body: rename("renamed"), status: 200},
		{name: "rename it to the same", method: "PATCH", path: "/agent/chats/" + own, key: bot, body: rename("renamed"), status: 200},
		{name: "rename, blank", method: "PATCH", path: "/agent/chats/" + own, key: bot, body: rename(" "), status: 422},
		{name: "rename a room it does not own", method: "PATCH", path: "/agent/chats/" + f.room.ID, key: bot, body: rename("x"), status: 403},
		{name: "rename an unknown room", method: "PATCH", path: "/agent/chats/" + unknownID, key: bot, body: rename("x"), status: 404},
		{name: "rename without a key", method: "PATCH", path: "/agent/chats/" + own, body: rename("x"), status: 401, offDocument: "X-API-Key is a required header"},
	} {
		c.check(t, ex)
	}
	c.requireEveryDocumentedStatus(t, roomOperations)
	renames := 0
	for _, e := range f.b.Events() {
		if e.Kind == fakeband.EventRename {
			renames++
		}
	}
	assert.Equal(t, 1, renames, "renaming to the same title changed nothing")
}
