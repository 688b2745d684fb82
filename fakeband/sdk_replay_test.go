package fakeband_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

// These tests replay, request by request and frame by frame, what Band's
// official SDKs do at start-up, per message, on a push, on a control
// signal and on reconnect, as read from their source (band-ai/band-sdk-python
// at 1ca53ba, "PY:"; band-ai/band-sdk-typescript packages/sdk at 1db703b,
// "TS:"), and check every answer has what that SDK reads from it. The
// list of calls with their sources is BAND_API_FIELD_GUIDE.md, "What
// Band's official SDKs call".

// sdkRun is one agent driven the way an SDK drives it.
type sdkRun struct {
	*fixture
	t  *testing.T
	ws *socketClient
}

// call makes one REST call and requires the status the SDK expects.
func (s *sdkRun) call(method, path string, body any, status int) response {
	s.t.Helper()
	r := s.do(s.t, method, path, s.bot.Key, body)
	require.Equal(s.t, status, r.status, "%s %s: %s", method, path, r.raw)
	if status == http.StatusNoContent {
		require.Empty(s.t, r.raw, "204 has no body")
	}
	return r
}

// has requires that obj holds each field with a value of the JSON type
// named after it ("id:string", "metadata:object", "total_pages:number").
func has(t *testing.T, obj map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		name, kind, _ := strings.Cut(f, ":")
		v, ok := obj[name]
		require.True(t, ok, "field %s is missing from %v", name, obj)
		switch kind {
		case "string":
			assert.IsType(t, "", v, "%s", name)
		case "nonempty":
			assert.NotEmpty(t, v, "%s", name)
		case "number":
			assert.IsType(t, 0.0, v, "%s", name)
		case "bool":
			assert.IsType(t, true, v, "%s", name)
		case "object":
			assert.IsType(t, map[string]any{}, v, "%s", name)
		case "list":
			assert.IsType(t, []any{}, v, "%s", name)
		}
	}
}

// chatMessageFields are what both SDKs read from a ChatMessage (PY:
// src/band/platform/link.py get_next_message builds PlatformMessage from
// them; TS: src/platform/ThenvoiLink.ts toPlatformMessage).
var chatMessageFields = []string{"id:string", "chat_room_id:string", "content:string", "sender_id:string",
	"sender_type:string", "sender_name:string", "message_type:string", "metadata:object", "inserted_at:string"}

// messageCreatedFields are what both SDKs validate a message_created push
// against, dropping it otherwise (PY: src/band/client/streaming/client.py
// MessageCreatedPayload; TS: src/platform/streaming/payloadSchemas.ts).
var messageCreatedFields = []string{"id:string", "content:string", "message_type:string", "sender_id:string",
	"sender_type:string", "inserted_at:string", "updated_at:string", "metadata:object"}

// The Python SDK (band-sdk 1.6): PlatformRuntime.start, then each room's
// ExecutionContext, then one message's cycle, a live push, stop and play,
// a participant joining, and a reconnect.
func TestPythonSDKSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		s := &sdkRun{fixture: f, t: t}
		waiting := f.say(t, "sent while the agent was away")

		// PY:src/band/runtime/platform_runtime.py _fetch_agent_metadata: GET
		// /agent/me; the SDK refuses to start unless data.description is set.
		me := s.call("GET", "/agent/me", nil, 200).data(t)
		has(t, me, "id:string", "name:string", "handle:string", "description:nonempty")

		// PY:src/band/client/streaming/client.py __aenter__: the upgrade URL
		// carries api_key, vsn and agent_id; the key also goes in x-api-key.
		q := url.Values{"api_key": {f.bot.Key}, "vsn": {"2.0.0"}, "agent_id": {f.bot.ID}}
		ws, resp, err := tryDial(f.b.HTTPClient(), f.b.SocketURL()+"?"+q.Encode(), http.Header{"X-Api-Key": {f.bot.Key}})
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		s.ws = startClient(t, ws)

		// PY:src/band/platform/link.py connect: agent_control first (its
		// supersede and agent.control handlers), then
		// PY:src/band/runtime/presence.py start: agent_rooms.
		s.ws.mustJoin("agent_control:" + f.bot.ID)
		s.ws.mustJoin("agent_rooms:" + f.bot.ID)

		// PY:src/band/runtime/presence.py _list_existing_rooms, through
		// PY:src/band/runtime/tools.py iter_chat_pages: page 1, page_size 100,
		// more pages while metadata.total_pages says so.
		chats := s.call("GET", "/agent/chats?page=1&page_size=100", nil, 200)
		has(t, chats.body(t)["metadata"].(map[string]any), "total_pages:number")
		rooms := chats.list(t)
		require.Len(t, rooms, 1)
		has(t, rooms[0].(map[string]any), "id:string", "inserted_at:string", "updated_at:string")

		// PY:src/band/platform/link.py subscribe_room: chat_room, then
		// room_participants; a refused room_participants makes it leave the
		// room's chat_room topic, so both must be accepted.
		chatRef := s.ws.mustJoin("chat_room:" + f.room.ID)
		partRef := s.ws.mustJoin("room_participants:" + f.room.ID)

		// PY:src/band/platform/link.py get_stale_processing_messages (the
		// crash-recovery sweep at a room's start): status=processing, page
		// by page while page < metadata.total_pages.
		stale := s.call("GET", f.chat("/messages?status=processing&page=1"), nil, 200)
		assert.Empty(t, stale.list(t))
		has(t, stale.body(t)["metadata"].(map[string]any), "total_pages:number")

		// PY:src/band/runtime/execution.py _synchronize_with_next: /next
		// until 204; each message runs one cycle (below).
		next := s.call("GET", f.chat("/messages/next"), nil, 200).data(t)
		has(t, next, chatMessageFields...)
		require.Equal(t, waiting, next["id"])
		s.pythonCycle(waiting)
		s.call("GET", f.chat("/messages/next"), nil, 204)

		// A live message: message_created on chat_room with the fields
		// PY's MessageCreatedPayload requires, mentions in metadata.
		live := f.say(t, "live")
		push := s.ws.next()
		require.Equal(t, phoenix.Frame{JoinRef: chatRef, Topic: "chat_room:" + f.room.ID, Event: "message_created", Payload: push.Payload}, push)
		p := payload(t, push)
		has(t, p, messageCreatedFields...)
		assert.Equal(t, live, p["id"])
		mentions := p["metadata"].(map[string]any)["mentions"].([]any)
		has(t, mentions[0].(map[string]any), "id:string", "handle:string")
		s.pythonCycle(live)

		// Control: PY:src/band/client/streaming/client.py AgentControlPayload
		// (mode, scope, agent_id required; correlation_id for its dedup), and
		// the platform's gate while stopped: /next 204, posting 403.
		require.NoError(t, f.b.StopRoom(f.room.ID))
		ctl := payload(t, s.ws.next())
		has(t, ctl, "mode:string", "scope:string", "agent_id:string", "room_id:string", "correlation_id:string")
		assert.Equal(t, "stop", ctl["mode"])
		held := f.say(t, "while stopped")
		assert.Equal(t, "message_created", s.ws.next().Event, "pushed while stopped; the SDK ignores it")
		s.call("GET", f.chat("/messages/next"), nil, 204)
		s.call("POST", f.chat("/messages"), post("too late", map[string]any{"id": f.alice.ID}), 403)
		require.NoError(t, f.b.PlayRoom(f.room.ID))
		assert.Equal(t, "play", payload(t, s.ws.next())["mode"])
		assert.Equal(t, held, s.call("GET", f.chat("/messages/next"), nil, 200).data(t)["id"])

		// PY:src/band/client/streaming/client.py ParticipantAddedPayload
		// (id, name, type required) on room_participants.
		helper := f.b.AddAgent("Helper")
		require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
		added := s.ws.next()
		assert.Equal(t, phoenix.Frame{JoinRef: partRef, Topic: "room_participants:" + f.room.ID, Event: "participant_added", Payload: added.Payload}, added)
		has(t, payload(t, added), "id:string", "name:string", "type:string")

		// Reconnect: PY:src/band/runtime/presence.py _handle_reconnect lists
		// the rooms again, the Phoenix client rejoins its topics, and
		// PY:src/band/runtime/runtime.py _on_reconnected asks each room to
		// resync through /next.
		f.b.DropSockets(f.bot.ID)
		ws2, _, err := tryDial(f.b.HTTPClient(), f.b.SocketURL()+"?"+q.Encode(), http.Header{"X-Api-Key": {f.bot.Key}})
		require.NoError(t, err)
		s.ws = startClient(t, ws2)
		for _, topic := range []string{"agent_control:" + f.bot.ID, "agent_rooms:" + f.bot.ID, "chat_room:" + f.room.ID, "room_participants:" + f.room.ID} {
			s.ws.mustJoin(topic)
		}
		s.call("GET", "/agent/chats?page=1&page_size=100", nil, 200)
		assert.Equal(t, held, s.call("GET", f.chat("/messages/next"), nil, 200).data(t)["id"], "the held message is still the room's head")
		s.ws.requireQuiet()
	})
}

// pythonCycle is PY:src/band/runtime/execution.py _process_event_body for
// one message: hydrate (participants, then context), claim, working on,
// the handler's tool calls, working off, processed.
func (s *sdkRun) pythonCycle(messageID string) {
	t := s.t
	// ExecutionContext.load_participants and hydrate.
	parts := s.call("GET", s.chat("/participants"), nil, 200).list(t)
	for _, p := range parts {
		has(t, p.(map[string]any), "id:string", "name:string", "type:string", "role:string", "status:string")
	}
	ctx := s.call("GET", s.chat("/context"), nil, 200)
	has(t, ctx.body(t), "data:list", "metadata:object", "meta:object")
	// PY:src/band/platform/link.py mark_processing.
	claimed := s.call("POST", s.chat("/messages/"+messageID+"/processing"), nil, 200).data(t)
	assert.Equal(t, "processing", claimed["status"])
	// PY:src/band/runtime/working_state.py through link.report_activity.
	s.call("POST", s.chat("/activity"), map[string]any{"working": true}, 200)
	// PY:src/band/runtime/tools.py send_event and send_message (handles
	// resolved to ids from the participants read above).
	s.call("POST", s.chat("/events"), map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought", "metadata": nil}}, 201)
	assert.Equal(t, "event_created", s.ws.next().Event, "PY lists it as known and unhandled")
	sent := s.call("POST", s.chat("/messages"), post("echo", map[string]any{"id": s.alice.ID, "handle": s.alice.Handle}), 201).data(t)
	has(t, sent, "id:string")
	// The agent's own reply comes back on chat_room; PY's preprocessor
	// skips it as its own (src/band/preprocessing/default.py).
	echo := payload(t, s.ws.next())
	assert.Equal(t, sent["id"], echo["id"])
	assert.Equal(t, s.bot.ID, echo["sender_id"])
	s.call("POST", s.chat("/activity"), map[string]any{"working": false}, 200)
	done := s.call("POST", s.chat("/messages/"+messageID+"/processed"), nil, 200).data(t)
	assert.Equal(t, "processed", done["status"])
}

// The TypeScript SDK (@thenvoi/sdk 0.1.7): AgentRuntime.start, each room's
// Execution.processLoop, one message through PlatformRuntime.executeAdapter
// with context hydration, and a room removed.
func TestTypeScriptSDKSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		s := &sdkRun{fixture: f, t: t}
		for i := range 3 {
			f.say(t, "backlog "+string(rune('a'+i)))
		}

		// TS:src/client/rest/FernRestAdapter.ts getAgentMe (retried on 429);
		// TS:src/runtime/PlatformRuntime.ts reads name and description.
		me := s.call("GET", "/agent/me", nil, 200).data(t)
		has(t, me, "id:string", "name:string", "description:string")

		// TS:src/platform/streaming/PhoenixChannelsTransport.ts: phoenix.js
		// appends /websocket to the URL (the SDK strips a trailing one first),
		// sends agent_id and vsn as parameters and the key as x-api-key
		// (resolveWebSocketFactory).
		q := url.Values{"agent_id": {f.bot.ID}, "vsn": {"2.0.0"}}
		ws, resp, err := tryDial(f.b.HTTPClient(), f.b.SocketURL()+"?"+q.Encode(), http.Header{"X-Api-Key": {f.bot.Key}})
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		s.ws = startClient(t, ws)

		// handleOpen joins the mandatory agent_control topic; then
		// TS:src/runtime/rooms/AgentRuntime.ts start: agent_rooms, the
		// existing rooms, and agent_contacts (capabilities.contacts is on by
		// default, TS:src/contracts/protocols.ts).
		s.ws.mustJoin("agent_control:" + f.bot.ID)
		s.ws.mustJoin("agent_rooms:" + f.bot.ID)
		// TS:src/runtime/rooms/subscriptions.ts through ThenvoiLink.listAllChats
		// and TS:src/client/rest/pagination.ts: page_size 100, strict integer
		// page metadata, total_pages ends the loop.
		chats := s.call("GET", "/agent/chats?page=1&page_size=100", nil, 200)
		has(t, chats.body(t)["metadata"].(map[string]any), "page:number", "page_size:number", "total_pages:number", "total_count:number")
		// TS:src/platform/ThenvoiLink.ts joinRoomTopics.
		s.ws.mustJoin("chat_room:" + f.room.ID)
		s.ws.mustJoin("room_participants:" + f.room.ID)
		s.ws.mustJoin("agent_contacts:" + f.bot.ID)

		// TS:src/runtime/Execution.ts processLoop: recoverStaleProcessingMessages
		// (ThenvoiLink.getStaleProcessingMessages: page 1, page_size 50,
		// status processing), then synchronizeWithNext.
		s.call("GET", f.chat("/messages?page=1&page_size=50&status=processing"), nil, 200)
		for range 3 {
			next := s.call("GET", f.chat("/messages/next"), nil, 200).data(t)
			has(t, next, chatMessageFields...)
			s.typescriptCycle(next["id"].(string))
		}
		s.call("GET", f.chat("/messages/next"), nil, 204)
		for range 3 {
			assert.Equal(t, f.bot.ID, payload(t, s.ws.next())["sender_id"], "the agent's own replies are echoed")
		}

		// TS:src/platform/streaming/payloadSchemas.ts: room_removed must carry
		// id, status, type, title and removed_at as strings, or it is dropped.
		require.NoError(t, f.b.RemoveParticipant(f.room.ID, f.bot.ID))
		removed := s.ws.next()
		assert.Equal(t, "participant_removed", removed.Event, "heard on the room's topic before leaving")
		gone := s.ws.next()
		require.Equal(t, "room_removed", gone.Event)
		has(t, payload(t, gone), "id:string", "status:string", "type:string", "title:string", "removed_at:string")
		s.call("GET", f.chat("/messages/next"), nil, 404)
		s.ws.requireQuiet()
	})
}

// typescriptCycle is one message through TS:src/runtime/PlatformRuntime.ts
// executeAdapter (markProcessing, the adapter, markProcessed), with the
// adapter's context hydration (TS:src/runtime/ExecutionContext.ts
// hydrateContext: participants, then /context page by page with
// page_size = min(maxContextMessages, 100) until total_pages) and a reply.
func (s *sdkRun) typescriptCycle(messageID string) {
	t := s.t
	s.call("POST", s.chat("/messages/"+messageID+"/processing"), nil, 200)
	s.call("GET", s.chat("/participants"), nil, 200)
	seen := map[string]bool{}
	for page := 1; ; page++ {
		r := s.call("GET", s.chat("/context?page="+string(rune('0'+page))+"&page_size=2"), nil, 200)
		meta := r.body(t)["metadata"].(map[string]any)
		has(t, meta, "total_pages:number", "page:number")
		for _, m := range r.list(t) {
			id := m.(map[string]any)["id"].(string)
			require.False(t, seen[id], "page %d repeats %s: the SDK would read it twice", page, id)
			seen[id] = true
		}
		if float64(page) >= meta["total_pages"].(float64) {
			break
		}
	}
	// TS:src/client/rest/FernRestAdapter.ts createChatMessage sends
	// message_type and metadata beside content and mentions.
	s.call("POST", s.chat("/messages"), map[string]any{"message": map[string]any{
		"content": "echo", "message_type": "text", "metadata": map[string]any{},
		"mentions": []map[string]any{{"id": s.alice.ID, "handle": s.alice.Handle}},
	}}, 201)
	s.call("POST", s.chat("/messages/"+messageID+"/processed"), nil, 200)
}
