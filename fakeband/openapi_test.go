package fakeband_test

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The agent operations the fake serves, by the document's operationId.
var agentOperations = []string{
	"getAgentMe", "listAgentChats", "getAgentNextMessage", "markAgentMessageProcessing",
	"markAgentMessageProcessed", "markAgentMessageFailed", "createAgentChatMessage", "getAgentChatContext",
}

// conformanceExceptions are where the fake deliberately answers a status
// the document does not list for the operation. Each is checked to still
// be undocumented, and its body is still validated.
var conformanceExceptions = []exception{
	{op: "getAgentNextMessage", status: 204, why: "nothing to process (or the room is stopped): the document " +
		"says \"Returns 204 No Content\" in the operation's description but lists only 200/401/403/404; " +
		"every client treats 204 as empty (band-api.md §2.2, §6 #1)"},
	{op: "listAgentChats", status: 422, body: "ValidationError", why: "the fake refuses a page or page_size " +
		"out of 1..100 with validation_error rather than clamp, a choice doc.go records; the document lists no " +
		"422 for the page-only listing"},
	{status: 429, why: "a FailBefore fault with EmptyBody imitates the AWS load balancer's throttling, which " +
		"answers an empty 429 no operation documents (band-api.md §1.2-1.4, GH#107)"},
	{status: 503, notFor: []string{"reportAgentChatActivity"}, body: "Error", why: "a FailBefore fault's default: an " +
		"overloaded platform; the document lists 503 only for /activity"},
	{op: "listAgentPeers", status: 422, body: "ValidationError", why: "the fake refuses a page or page_size out of " +
		"1..100, or a not_in_chat that is no UUID, with validation_error rather than guess; the document lists no 422 " +
		"for the peer listing"},
}

// Every response the fake gives on the agent endpoints, successes and
// refusals, holds to Band's published OpenAPI document: status, envelope,
// fields and types.
func TestAgentEndpointsConformToBandsOpenAPIDocument(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	c := &conformance{doc: doc, router: router, client: f.c, exceptions: conformanceExceptions, seen: map[string]map[int]bool{}}
	const unknownID = "00000000-0000-4000-8000-000000000000"
	bot, alice := f.bot.Key, f.alice.Key
	chat := "/agent/chats/" + f.room.ID
	mentionAlice := post("hello", map[string]any{"id": f.alice.ID})

	first := f.say(t, "first")
	second := f.say(t, "second")
	for _, ex := range []exchange{
		{name: "me", method: "GET", path: "/agent/me", key: bot, status: 200},
		{name: "chats", method: "GET", path: "/agent/chats", key: bot, status: 200},
		{name: "chats, a page past the end", method: "GET", path: "/agent/chats?page=3&page_size=1", key: bot, status: 200},
		{name: "chats, page_size over 100", method: "GET", path: "/agent/chats?page_size=101", key: bot, status: 422},
		{name: "next serves the oldest", method: "GET", path: chat + "/messages/next", key: bot, status: 200},
		{name: "next in a room not the agent's", method: "GET", path: "/agent/chats/" + unknownID + "/messages/next", key: bot, status: 404},
		{name: "processing", method: "POST", path: chat + "/messages/" + first + "/processing", key: bot, status: 200},
		{name: "processing again opens attempt 2", method: "POST", path: chat + "/messages/" + first + "/processing", key: bot, status: 200},
		{name: "processing an unknown message", method: "POST", path: chat + "/messages/" + unknownID + "/processing", key: bot, status: 404},
		{name: "post", method: "POST", path: chat + "/messages", key: bot, body: mentionAlice, status: 201},
		{name: "post by handle", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"handle": f.alice.Handle}), status: 201},
		{name: "post to an unknown room", method: "POST", path: "/agent/chats/" + unknownID + "/messages", key: bot, body: mentionAlice, status: 404},
		{name: "post, blank content", method: "POST", path: chat + "/messages", key: bot, body: post(" ", map[string]any{"id": f.alice.ID}), status: 422},
		{name: "post, no mentions", method: "POST", path: chat + "/messages", key: bot, body: post("hi"), status: 422},
		{name: "post, self mention", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"id": f.bot.ID}), status: 422},
		{name: "post, duplicate mentions", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"id": f.alice.ID}, map[string]any{"handle": f.alice.Handle}), status: 422},
		{name: "post, unknown handle", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"handle": "nobody"}), status: 422},
		{name: "post, mention outside the room", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"id": unknownID}), status: 422},
		{name: "post, mention without id or handle", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"name": "Alice"}), status: 422},
		{name: "post, bad mention kind", method: "POST", path: chat + "/messages", key: bot, body: post("hi", map[string]any{"id": f.alice.ID, "kind": "shout"}), status: 422,
			offDocument: "kind is an enum of mention and reference"},
		{name: "post, not JSON", method: "POST", path: chat + "/messages", key: bot, body: "{", status: 422, offDocument: "the body is not JSON"},
		{name: "processed", method: "POST", path: chat + "/messages/" + first + "/processed", key: bot, status: 200},
		{name: "processed again: no open attempt", method: "POST", path: chat + "/messages/" + first + "/processed", key: bot, status: 422},
		{name: "processed, unknown message", method: "POST", path: chat + "/messages/" + unknownID + "/processed", key: bot, status: 404},
		{name: "processing a processed message", method: "POST", path: chat + "/messages/" + first + "/processing", key: bot, status: 422},
		{name: "failed without an attempt", method: "POST", path: chat + "/messages/" + second + "/failed", key: bot, body: map[string]any{"error": "boom"}, status: 422},
		{name: "processing the second", method: "POST", path: chat + "/messages/" + second + "/processing", key: bot, status: 200},
		{name: "failed, blank error", method: "POST", path: chat + "/messages/" + second + "/failed", key: bot, body: map[string]any{"error": " "}, status: 422},
		{name: "failed, no error field", method: "POST", path: chat + "/messages/" + second + "/failed", key: bot, body: map[string]any{}, status: 422,
			offDocument: "error is a required field"},
		{name: "failed", method: "POST", path: chat + "/messages/" + second + "/failed", key: bot, body: map[string]any{"error": "boom"}, status: 200},
		{name: "failed, unknown message", method: "POST", path: chat + "/messages/" + unknownID + "/failed", key: bot, body: map[string]any{"error": "boom"}, status: 404},
		{name: "next serves the failed message again", method: "GET", path: chat + "/messages/next", key: bot, status: 200},
		{name: "context, first page", method: "GET", path: chat + "/context?limit=1", key: bot, status: 200},
		{name: "context, all", method: "GET", path: chat + "/context", key: bot, status: 200},
		{name: "context, limit 0", method: "GET", path: chat + "/context?limit=0", key: bot, status: 422},
		{name: "context, bad cursor", method: "GET", path: chat + "/context?cursor=nonsense", key: bot, status: 422},
		{name: "context, unknown room", method: "GET", path: "/agent/chats/" + unknownID + "/context", key: bot, status: 404},
	} {
		c.check(t, ex)
	}

	// Consumed: next has nothing.
	c.check(t, exchange{name: "processing the second again", method: "POST", path: chat + "/messages/" + second + "/processing", key: bot, status: 200})
	c.check(t, exchange{name: "processed the second", method: "POST", path: chat + "/messages/" + second + "/processed", key: bot, status: 200})
	c.check(t, exchange{name: "next, nothing to do", method: "GET", path: chat + "/messages/next", key: bot, status: 204})

	// Stopped: next is gated and posting refused.
	f.say(t, "while stopped")
	require.NoError(t, f.b.StopRoom(f.room.ID))
	c.check(t, exchange{name: "next while stopped", method: "GET", path: chat + "/messages/next", key: bot, status: 204})
	c.check(t, exchange{name: "post while stopped", method: "POST", path: chat + "/messages", key: bot, body: mentionAlice, status: 403})
	require.NoError(t, f.b.PlayRoom(f.room.ID))

	// Every operation: no key, a wrong key, a human's key, and the faults.
	calls := []exchange{
		{name: "me", method: "GET", path: "/agent/me"},
		{name: "chats", method: "GET", path: "/agent/chats"},
		{name: "next", method: "GET", path: chat + "/messages/next"},
		{name: "processing", method: "POST", path: chat + "/messages/" + first + "/processing"},
		{name: "processed", method: "POST", path: chat + "/messages/" + first + "/processed"},
		{name: "failed", method: "POST", path: chat + "/messages/" + first + "/failed", body: map[string]any{"error": "boom"}},
		{name: "post", method: "POST", path: chat + "/messages", body: mentionAlice},
		{name: "context", method: "GET", path: chat + "/context"},
	}
	for _, call := range calls {
		noKey, wrongKey, human := call, call, call
		noKey.name, noKey.status, noKey.offDocument = call.name+" without a key", 401, "X-API-Key is a required header"
		wrongKey.name, wrongKey.key, wrongKey.status = call.name+" with an unknown key", "band_a_nonsense", 401
		human.name, human.key, human.status = call.name+" with a human's key", alice, 403
		c.check(t, noKey)
		c.check(t, wrongKey)
		c.check(t, human)

		f.b.Inject(fakeband.Fault{Nth: 1, Kind: fakeband.FailBefore, Status: 429, EmptyBody: true})
		alb := call
		alb.name, alb.key, alb.status = call.name+" throttled by the load balancer", bot, 429
		c.check(t, alb)
		f.b.ClearFaults()
		f.b.Inject(fakeband.Fault{Nth: 1, Kind: fakeband.FailBefore})
		busy := call
		busy.name, busy.key, busy.status = call.name+" unavailable", bot, 503
		c.check(t, busy)
		f.b.ClearFaults()
	}

	c.requireEveryDocumentedStatus(t, agentOperations)
	for _, ep := range []fakeband.Endpoint{
		fakeband.EndpointMe, fakeband.EndpointChats, fakeband.EndpointNext, fakeband.EndpointProcessing,
		fakeband.EndpointProcessed, fakeband.EndpointFailed, fakeband.EndpointPost, fakeband.EndpointContext,
	} {
		assert.Positive(t, f.b.Requests()[ep], "agent endpoint %s was exercised", ep)
	}
	for _, op := range agentOperations {
		assert.Contains(t, c.seen, op, "operation %s was exercised", op)
	}
	next := c.operation(t, "getAgentNextMessage")
	assert.Contains(t, next.Description, "204 No Content", "the 204 exception rests on the document's prose")
}

// Every agent operation of the document is one a conformance test above
// exercises at every documented status: an operation Band adds to its
// agent API is not served, or not checked, without this test saying so.
func TestEveryAgentOperationOfTheDocumentIsChecked(t *testing.T) {
	doc, _ := loadBandDocument(t)
	checked := map[string]bool{}
	for _, ops := range [][]string{agentOperations, toolOperations, boardOperations, contactOperations, roomOperations} {
		for _, op := range ops {
			assert.False(t, checked[op], "%s is checked by two tests", op)
			checked[op] = true
		}
	}
	agent := 0
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/api/v1/agent/") {
			continue
		}
		for method, op := range item.Operations() {
			agent++
			assert.True(t, checked[op.OperationID], "%s %s (%s) is checked against the document", method, path, op.OperationID)
		}
	}
	assert.Equal(t, len(checked), agent, "every operation checked is one of the document's agent API")
}

// The checker is not vacuous: a response with a missing field, a wrong
// type, an undocumented status or a bad error envelope fails it.
func TestConformanceCheckRejectsWrongShapes(t *testing.T) {
	doc, router := loadBandDocument(t)
	f := newFixture(t)
	me := agentMeRoute(t, router, f.bot.Key)
	good := `{"data":{"id":"` + f.bot.ID + `","name":"Bot","handle":"owner/bot","owner_uuid":"` + f.alice.ID +
		`","inserted_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}`
	require.NoError(t, validate(me, 200, good), "the good body passes")

	for name, tc := range map[string]struct {
		status int
		body   string
	}{
		"no envelope":                 {200, `{"id":"` + f.bot.ID + `"}`},
		"a required field gone":       {200, `{"data":{"id":"` + f.bot.ID + `","name":"Bot"}}`},
		"a field of wrong type":       {200, `{"data":{"id":"` + f.bot.ID + `","name":5,"handle":"h","owner_uuid":"` + f.alice.ID + `","inserted_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}`},
		"an id that is no uuid":       {200, `{"data":{"id":"bot-1","name":"Bot","handle":"owner/bot","owner_uuid":"` + f.alice.ID + `","inserted_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}`},
		"a time that is no date-time": {200, `{"data":{"id":"` + f.bot.ID + `","name":"Bot","handle":"owner/bot","owner_uuid":"` + f.alice.ID + `","inserted_at":"yesterday","updated_at":"2026-01-01T00:00:00Z"}}`},
		"undocumented status":         {418, `{"error":{"code":"teapot","message":"no","request_id":"r"}}`},
		"error without code":          {401, `{"error":{"message":"no","request_id":"r"}}`},
	} {
		assert.Error(t, validate(me, tc.status, tc.body), name)
	}
	assert.NotNil(t, doc.Components.Schemas["Agent_API_Identity_getAgentMe_Response_200"], "schema names were repaired")
}

func agentMeRoute(t *testing.T, router routers.Router, key string) *openapi3filter.RequestValidationInput {
	t.Helper()
	req, err := newAgentRequest("GET", "/agent/me", key)
	require.NoError(t, err)
	route, params, err := router.FindRoute(req)
	require.NoError(t, err)
	return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
}
