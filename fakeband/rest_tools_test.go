package fakeband_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/phoenix"
)

// An agent's events are in its own /context, in the room's order, with
// their type and metadata (Band's document, getAgentChatContext: "All
// messages the agent sent (any type ...)"), but never in another agent's
// context, never delivered and never on /next.
func TestEventsAreInTheSendersContextOnly(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddAgent("Other")
	require.NoError(t, f.b.AddParticipant(f.room.ID, other.ID))
	asked := f.say(t, "question")
	r := f.do(t, http.MethodPost, f.chat("/events"), f.bot.Key, map[string]any{"event": map[string]any{
		"content": "calling lookup", "message_type": "tool_call", "metadata": map[string]any{"id": "call-1"},
	}})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	eventID := r.data(t)["id"].(string)
	assert.Equal(t, "tool_call", r.data(t)["message_type"])
	assert.Equal(t, true, r.data(t)["success"])

	ctx := f.do(t, http.MethodGet, f.chat("/context"), f.bot.Key, nil).list(t)
	require.Len(t, ctx, 2, "the mention and the agent's own event")
	assert.Equal(t, asked, ctx[0].(map[string]any)["id"])
	ev := ctx[1].(map[string]any)
	assert.Equal(t, eventID, ev["id"])
	assert.Equal(t, "tool_call", ev["message_type"])
	assert.Equal(t, "calling lookup", ev["content"])
	assert.Equal(t, map[string]any{"id": "call-1"}, ev["metadata"])

	otherCtx := f.do(t, http.MethodGet, f.chat("/context"), other.Key, nil).list(t)
	assert.Empty(t, otherCtx, "an event mentions no one: only its sender sees it")

	f.mark(t, asked, "processing", nil)
	f.mark(t, asked, "processed", nil)
	next := f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil)
	assert.Equal(t, http.StatusNoContent, next.status, "an event is never served as work")
	assert.Empty(t, f.b.Status(f.bot.ID, eventID), "an event is delivered to no one")

	events := f.b.ChatEvents(f.room.ID)
	require.Len(t, events, 1)
	assert.Equal(t, fakeband.ChatEvent{Seq: events[0].Seq, ID: eventID, RoomID: f.room.ID, SenderID: f.bot.ID,
		MessageType: "tool_call", Content: "calling lookup", Metadata: json.RawMessage(`{"id":"call-1"}`)}, events[0])
	assert.Empty(t, f.b.Posts(f.room.ID)[1:], "an event is not a post")
	assert.Equal(t, fakeband.EventChatEvent, eventOf(t, f.b, events[0].Seq).Kind)
}

// The Go method refuses what the endpoint refuses, with the same codes.
func TestPostEventAppliesTheEndpointsRules(t *testing.T) {
	f := newFixture(t)
	_, err := f.b.PostEvent(f.room.ID, f.bot.ID, "text", "x", nil)
	assert.ErrorIs(t, err, fakeband.ErrValidation)
	_, err = f.b.PostEvent(f.room.ID, f.bot.ID, "attention", "x", json.RawMessage(`{"kind":"question","task_id":"t"}`))
	assert.ErrorIs(t, err, fakeband.ErrValidation, "the fake has no task for task_id to name")
	_, err = f.b.PostEvent(f.room.ID, f.alice.ID, "thought", "x", nil)
	assert.ErrorIs(t, err, fakeband.ErrNotFound, "only agents post events")
	require.NoError(t, f.b.StopRoom(f.room.ID))
	_, err = f.b.PostEvent(f.room.ID, f.bot.ID, "thought", "x", nil)
	assert.ErrorIs(t, err, fakeband.ErrStopped)
	require.NoError(t, f.b.PlayRoom(f.room.ID))
	id, err := f.b.PostEvent(f.room.ID, f.bot.ID, "thought", "hmm", nil)
	require.NoError(t, err)
	assert.Equal(t, id, f.b.ChatEvents(f.room.ID)[0].ID)
}

func eventOf(t *testing.T, b *fakeband.Band, seq int) fakeband.Event {
	t.Helper()
	for _, e := range b.Events() {
		if e.Seq == seq {
			return e
		}
	}
	t.Fatalf("no event %d", seq)
	return fakeband.Event{}
}

// Adding and removing participants over REST changes the room, pushes
// participant_added and participant_removed on room_participants:{room}
// to the room's agents, and room_added / room_removed to the agent
// concerned; the truth records each change.
func TestParticipantChangesArePushedAndRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		sibling := f.b.AddAgent("Sibling")
		c := dialSocket(t, f.b, f.bot.Key)
		ref := c.mustJoin("room_participants:" + f.room.ID)
		s := dialSocket(t, f.b, sibling.Key)
		s.mustJoin("agent_rooms:" + sibling.ID)

		r := f.do(t, http.MethodPost, f.chat("/participants"), f.bot.Key,
			map[string]any{"participant": map[string]any{"participant_id": sibling.ID}})
		require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
		assert.Equal(t, map[string]any{"id": sibling.ID, "name": "Sibling", "handle": sibling.Handle, "type": "Agent", "role": "member", "status": "active"}, r.data(t))

		added := c.next()
		assert.Equal(t, phoenix.Frame{JoinRef: ref, Topic: "room_participants:" + f.room.ID, Event: "participant_added", Payload: added.Payload}, added)
		assert.Equal(t, map[string]any{"id": sibling.ID, "name": "Sibling", "type": "Agent", "handle": sibling.Handle,
			"description": fakeband.DefaultDescription("Sibling")}, payload(t, added))
		roomAdded := s.next()
		assert.Equal(t, "room_added", roomAdded.Event)
		assert.Equal(t, f.room.ID, payload(t, roomAdded)["id"])

		list := f.do(t, http.MethodGet, f.chat("/participants"), f.bot.Key, nil).list(t)
		require.Len(t, list, 3)
		assert.Equal(t, []fakeband.Member{
			{ID: f.alice.ID, Name: "Alice", Handle: f.alice.Handle, Type: "User", Role: "owner"},
			{ID: f.bot.ID, Name: "Bot", Handle: f.bot.Handle, Type: "Agent", Role: "member"},
			{ID: sibling.ID, Name: "Sibling", Handle: sibling.Handle, Type: "Agent", Role: "member"},
		}, f.b.Members(f.room.ID))

		require.NoError(t, f.b.RemoveParticipant(f.room.ID, sibling.ID))
		removed := c.next()
		assert.Equal(t, "participant_removed", removed.Event)
		assert.Equal(t, map[string]any{"id": sibling.ID}, payload(t, removed))
		roomRemoved := s.next()
		assert.Equal(t, "room_removed", roomRemoved.Event)
		rr := payload(t, roomRemoved)
		for _, field := range []string{"id", "title", "status", "type", "removed_at"} {
			assert.IsType(t, "", rr[field], "room_removed.%s is a string, as the TypeScript SDK's schema requires", field)
		}
		c.requireQuiet()

		var kinds []string
		for _, e := range f.b.Events() {
			if e.AgentID == sibling.ID && e.RoomID == f.room.ID {
				kinds = append(kinds, e.Kind)
			}
		}
		assert.Equal(t, []string{fakeband.EventJoin, fakeband.EventLeave}, kinds)
	})
}

// A room the agent creates is its own: it owns it, is told of it on
// agent_rooms, and finds it in its listing.
func TestAnAgentCreatesARoomItOwns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		c.mustJoin("agent_rooms:" + f.bot.ID)
		r := f.do(t, http.MethodPost, "/agent/chats", f.bot.Key, map[string]any{"chat": map[string]any{"title": "  side  "}})
		require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
		room := r.data(t)
		assert.Equal(t, "side", room["title"], "the title is trimmed")
		assert.Nil(t, room["task_id"])
		added := c.next()
		assert.Equal(t, "room_added", added.Event)
		assert.Equal(t, room["id"], payload(t, added)["id"])
		assert.Equal(t, []fakeband.Member{{ID: f.bot.ID, Name: "Bot", Handle: f.bot.Handle, Type: "Agent", Role: "owner"}}, f.b.Members(room["id"].(string)))
		chats := f.do(t, http.MethodGet, "/agent/chats", f.bot.Key, nil).list(t)
		assert.Len(t, chats, 2)

		untitled := f.do(t, http.MethodPost, "/agent/chats", f.bot.Key, map[string]any{"chat": map[string]any{"title": " "}}).data(t)
		assert.Nil(t, untitled["title"], "a blank title leaves the room untitled")
	})
}

// Peers are the owner and the sibling agents, never the agent itself nor
// other humans; not_in_chat leaves out the room's participants.
func TestPeersAreTheOwnerAndSiblingAgents(t *testing.T) {
	f := newFixture(t)
	sibling := f.b.AddAgent("Sibling")
	f.b.AddHuman("Carol")
	ids := func(path string) []string {
		var out []string
		for _, p := range f.do(t, http.MethodGet, path, f.bot.Key, nil).list(t) {
			out = append(out, p.(map[string]any)["id"].(string))
		}
		return out
	}
	assert.Equal(t, []string{f.b.Owner().ID, sibling.ID}, ids("/agent/peers"))
	require.NoError(t, f.b.AddParticipant(f.room.ID, sibling.ID))
	assert.Equal(t, []string{f.b.Owner().ID}, ids("/agent/peers?not_in_chat="+f.room.ID))
	assert.Equal(t, []string{sibling.ID}, ids("/agent/peers?page=2&page_size=1"))
}

// GET .../messages filters by Band's status table and pages both ways.
func TestMessagesFilterByStatus(t *testing.T) {
	f := newFixture(t)
	done, inFlight, failed, fresh := f.say(t, "a"), f.say(t, "b"), f.say(t, "c"), f.say(t, "d")
	f.mark(t, done, "processing", nil)
	f.mark(t, done, "processed", nil)
	f.mark(t, inFlight, "processing", nil)
	f.mark(t, failed, "processing", nil)
	f.mark(t, failed, "failed", map[string]any{"error": "boom"})
	ids := func(query string) []string {
		var out []string
		r := f.do(t, http.MethodGet, f.chat("/messages"+query), f.bot.Key, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		for _, m := range r.list(t) {
			out = append(out, m.(map[string]any)["id"].(string))
		}
		return out
	}
	assert.Equal(t, []string{inFlight, failed, fresh}, ids(""))
	assert.Equal(t, []string{failed, fresh}, ids("?status=pending"))
	assert.Equal(t, []string{inFlight}, ids("?status=processing"))
	assert.Equal(t, []string{done}, ids("?status=processed"))
	assert.Equal(t, []string{failed}, ids("?status=failed"))
	assert.Equal(t, []string{done, inFlight, failed, fresh}, ids("?status=all"))

	first := f.do(t, http.MethodGet, f.chat("/messages?status=all&limit=3"), f.bot.Key, nil)
	meta := first.body(t)["metadata"].(map[string]any)
	assert.Equal(t, true, meta["has_more"])
	assert.Equal(t, "all", meta["status_filter"])
	assert.Equal(t, []string{fresh}, ids("?status=all&limit=3&cursor="+meta["next_cursor"].(string)))

	paged := f.do(t, http.MethodGet, f.chat("/messages?status=all&page=2&page_size=3"), f.bot.Key, nil)
	assert.Equal(t, "true", paged.header.Get("Deprecation"))
	assert.NotEmpty(t, paged.header.Get("Sunset"))
	pm := paged.body(t)["metadata"].(map[string]any)
	assert.Equal(t, map[string]any{"page": 2.0, "page_size": 3.0, "total_count": 4.0, "total_pages": 2.0,
		"has_more": false, "limit": 3.0, "next_cursor": nil, "status_filter": "all"}, pm)
	assert.Len(t, paged.list(t), 1)
}

// /context carries the deprecated "meta" beside "metadata", as Band does.
func TestContextCarriesTheDeprecatedMeta(t *testing.T) {
	f := newFixture(t)
	f.say(t, "a")
	body := f.do(t, http.MethodGet, f.chat("/context"), f.bot.Key, nil).body(t)
	assert.Equal(t, body["metadata"], body["meta"])
	assert.NotNil(t, body["meta"])
}

// /activity records the working indicator; the truth shows the last report.
func TestActivityIsRecorded(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, http.MethodPost, f.chat("/activity"), f.bot.Key, map[string]any{"working": true})
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, map[string]any{"working": true}, r.data(t))
	assert.True(t, f.b.Working(f.bot.ID, f.room.ID))
	f.do(t, http.MethodPost, f.chat("/activity"), f.bot.Key, map[string]any{"working": false})
	assert.False(t, f.b.Working(f.bot.ID, f.room.ID))
	var details []string
	for _, e := range f.b.Events() {
		if e.Kind == fakeband.EventActivity {
			details = append(details, e.Detail)
		}
	}
	assert.Equal(t, []string{"working", "idle"}, details)
}

// /agent/me has the description Band registers every agent with, and the
// owner can change it.
func TestMeHasTheAgentsDescription(t *testing.T) {
	f := newFixture(t)
	me := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).data(t)
	assert.Equal(t, fakeband.DefaultDescription("Bot"), me["description"])
	require.NoError(t, f.b.SetDescription(f.bot.ID, "answers questions"))
	me = f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).data(t)
	assert.Equal(t, "answers questions", me["description"])
	assert.ErrorIs(t, f.b.SetDescription(f.alice.ID, "x"), fakeband.ErrNotFound)
}

// A contact added or removed is pushed on agent_contacts:{agent} with the
// fields the SDKs require, and a contact is a peer with is_contact.
func TestContactsArePushedAndArePeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		carol := f.b.AddHuman("Carol")
		c := dialSocket(t, f.b, f.bot.Key)
		ref := c.mustJoin("agent_contacts:" + f.bot.ID)

		require.NoError(t, f.b.AddContact(f.bot.ID, carol.ID))
		added := c.next()
		assert.Equal(t, phoenix.Frame{JoinRef: ref, Topic: "agent_contacts:" + f.bot.ID, Event: "contact_added", Payload: added.Payload}, added)
		p := payload(t, added)
		for _, field := range []string{"id", "handle", "name", "type", "inserted_at"} {
			assert.IsType(t, "", p[field], "contact_added.%s", field)
		}
		assert.Equal(t, carol.ID, p["id"])
		require.NoError(t, f.b.AddContact(f.bot.ID, carol.ID), "again: nothing")

		var carolPeer map[string]any
		for _, peer := range f.do(t, http.MethodGet, "/agent/peers", f.bot.Key, nil).list(t) {
			if peer.(map[string]any)["id"] == carol.ID {
				carolPeer = peer.(map[string]any)
			}
		}
		require.NotNil(t, carolPeer, "a contact is a peer")
		assert.Equal(t, "contact", carolPeer["source"])
		assert.Equal(t, true, carolPeer["is_contact"])

		require.NoError(t, f.b.RemoveContact(f.bot.ID, carol.ID))
		removed := c.next()
		assert.Equal(t, "contact_removed", removed.Event)
		assert.Equal(t, map[string]any{"id": carol.ID}, payload(t, removed))
		assert.ErrorIs(t, f.b.RemoveContact(f.bot.ID, carol.ID), fakeband.ErrNotFound)
		assert.ErrorIs(t, f.b.AddContact(f.bot.ID, f.bot.ID), fakeband.ErrValidation)
		c.requireQuiet()
	})
}

// A page number whose (page-1)*page_size overflows int must be refused or
// answered with an empty page, never panic: (2^62)*2 wraps to a negative
// start, which the contact listings slice with.
func TestContactListingsSurviveAPageNumberThatOverflows(t *testing.T) {
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	bot := b.AddAgent("Bot")
	for _, path := range []string{
		"/api/v1/agent/contacts?page=4611686018427387905&page_size=2",
		"/api/v1/agent/contacts/requests?page=4611686018427387905&page_size=2",
	} {
		rec := serveOnce(t, b, http.MethodGet, path, bot.Key, "")
		require.Contains(t, []int{http.StatusOK, http.StatusUnprocessableEntity}, rec.Code, "%s: %s", path, rec.Body)
	}
}
