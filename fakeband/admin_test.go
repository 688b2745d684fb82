package fakeband_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// adminFixture is a fixture whose Band serves the admin API.
type adminFixture struct {
	*fixture
	bob fakeband.Human
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	b := fakeband.New(fakeband.Options{Seed: 1, Admin: true})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	f := &fixture{b: b, c: b.HTTPClient(), alice: b.AddHuman("Alice"), bot: b.AddAgent("Bot")}
	bob := b.AddHuman("Bob")
	f.room = b.AddRoom("general", f.alice, f.bot.ID, bob.ID)
	return &adminFixture{fixture: f, bob: bob}
}

// admin calls the admin API and decodes the answer's data (or error).
func (f *adminFixture) admin(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+fakeband.Host+fakeband.AdminPrefix+path, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s", raw)
	var env map[string]any
	require.NoError(t, json.Unmarshal(raw, &env), "%s", raw)
	if e, ok := env["error"].(map[string]any); ok {
		assert.NotEmpty(t, e["code"])
		assert.NotEmpty(t, e["message"])
		return resp.StatusCode, e
	}
	data, ok := env["data"].(map[string]any)
	require.True(t, ok, "no data object: %s", raw)
	return resp.StatusCode, data
}

func TestAdminAPIIsOffUnlessAsked(t *testing.T) {
	f := newFixture(t)
	req, err := http.NewRequest(http.MethodGet, "http://"+fakeband.Host+fakeband.AdminPrefix+"/setup", nil)
	require.NoError(t, err)
	r, err := f.c.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, http.StatusNotFound, r.StatusCode)
}

func TestAdminSetupListsTheCastWithKeys(t *testing.T) {
	f := newAdminFixture(t)
	status, setup := f.admin(t, http.MethodGet, "/setup", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "http://band.localhost/api/v1", setup["rest_url"])
	assert.Equal(t, "ws://band.localhost/api/v1/socket/websocket", setup["socket_url"])
	assert.Equal(t, "http://band.localhost/_admin", setup["admin_url"])
	owner := setup["owner"].(map[string]any)
	assert.Equal(t, f.b.Owner().Key, owner["api_key"])

	agents := setup["agents"].([]any)
	require.Len(t, agents, 1)
	bot := agents[0].(map[string]any)
	assert.Equal(t, map[string]any{"id": f.bot.ID, "name": "Bot", "handle": f.bot.Handle, "type": "Agent", "api_key": f.bot.Key,
		"description": fakeband.DefaultDescription("Bot")}, bot)
	humans := setup["humans"].([]any)
	require.Len(t, humans, 2, "the operator is listed apart")
	assert.Equal(t, f.alice.Key, humans[0].(map[string]any)["api_key"], "creation order")

	rooms := setup["rooms"].([]any)
	require.Len(t, rooms, 1)
	room := rooms[0].(map[string]any)
	assert.Equal(t, f.room.ID, room["id"])
	assert.Equal(t, f.alice.ID, room["owner_id"])
	var roles []string
	for _, m := range room["members"].([]any) {
		roles = append(roles, m.(map[string]any)["name"].(string)+":"+m.(map[string]any)["role"].(string))
	}
	assert.Equal(t, []string{"Alice:owner", "Bot:member", "Bob:member"}, roles)
}

func TestAdminSayDefaultsToTheOwnerMentioningEveryAgent(t *testing.T) {
	f := newAdminFixture(t)
	helper := f.b.AddAgent("Helper")
	require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))

	status, said := f.admin(t, http.MethodPost, "/say", map[string]any{"room": "general", "text": "hello"})
	require.Equal(t, http.StatusCreated, status, "%v", said)
	id := said["id"].(string)
	assert.Equal(t, []any{f.bot.ID, helper.ID}, said["recipients"])
	posts := f.b.Posts(f.room.ID)
	require.Len(t, posts, 1)
	assert.Equal(t, f.alice.ID, posts[0].SenderID, "the room's owner speaks")
	assert.Equal(t, "@[["+f.bot.ID+"]] @[["+helper.ID+"]] hello", posts[0].Content)
	assert.Equal(t, fakeband.StatusDelivered, f.b.Status(f.bot.ID, id))
	assert.Equal(t, fakeband.StatusDelivered, f.b.Status(helper.ID, id))
}

func TestAdminSayNamesSenderAndMentionsAnyWay(t *testing.T) {
	f := newAdminFixture(t)
	helper := f.b.AddAgent("Helper")
	require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
	for _, ref := range []string{f.bot.ID, "Bot", "bot", f.bot.Handle, "@" + f.bot.Handle} {
		status, said := f.admin(t, http.MethodPost, "/say", map[string]any{"room": f.room.ID, "from": "bob", "text": "hi", "mentions": []string{ref}})
		require.Equal(t, http.StatusCreated, status, "%s: %v", ref, said)
		assert.Equal(t, []any{f.bot.ID}, said["recipients"], ref)
	}
	for _, p := range f.b.Posts(f.room.ID) {
		assert.Equal(t, f.bob.ID, p.SenderID)
	}
}

func TestAdminSayRefusals(t *testing.T) {
	f := newAdminFixture(t)
	f.b.AddRoom("general", f.alice) // a second room with the same title
	lonely := f.b.AddRoom("lonely", f.alice)
	for name, tc := range map[string]struct {
		body   any
		status int
		code   string
	}{
		"ambiguous title":     {map[string]any{"room": "general", "text": "hi"}, http.StatusConflict, "ambiguous"},
		"unknown room":        {map[string]any{"room": "nowhere", "text": "hi"}, http.StatusNotFound, "not_found"},
		"no room":             {map[string]any{"text": "hi"}, http.StatusUnprocessableEntity, "validation_error"},
		"blank text":          {map[string]any{"room": f.room.ID, "text": "  "}, http.StatusUnprocessableEntity, "validation_error"},
		"unknown sender":      {map[string]any{"room": f.room.ID, "from": "zed", "text": "hi"}, http.StatusNotFound, "not_found"},
		"nobody to mention":   {map[string]any{"room": lonely.ID, "text": "hi"}, http.StatusUnprocessableEntity, "mentions_required"},
		"mention an outsider": {map[string]any{"room": lonely.ID, "text": "hi", "mentions": []string{"Bot"}}, http.StatusUnprocessableEntity, "mentioned_participant_not_in_room"},
		"a typo in a field":   {map[string]any{"room": f.room.ID, "txt": "hi"}, http.StatusBadRequest, "bad_request"},
		"not JSON":            {"{", http.StatusBadRequest, "bad_request"},
		"two objects":         {`{"room": "x"} {}`, http.StatusBadRequest, "bad_request"},
	} {
		status, e := f.admin(t, http.MethodPost, "/say", tc.body)
		assert.Equal(t, tc.status, status, "%s: %v", name, e)
		assert.Equal(t, tc.code, e["code"], name)
	}
	assert.Empty(t, f.b.Posts(f.room.ID))
	assert.Empty(t, f.b.Posts(lonely.ID))
}

func TestAdminStopAndPlay(t *testing.T) {
	f := newAdminFixture(t)
	status, stopped := f.admin(t, http.MethodPost, "/stop", map[string]any{"room": "general"})
	require.Equal(t, http.StatusOK, status, "%v", stopped)
	assert.Equal(t, map[string]any{"room_id": f.room.ID, "mode": "stop", "agent_ids": []any{f.bot.ID}}, stopped)
	assert.True(t, f.b.Stopped(f.bot.ID, f.room.ID))
	assert.Equal(t, http.StatusNoContent, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).status)

	status, played := f.admin(t, http.MethodPost, "/play", map[string]any{"room": f.room.ID})
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "play", played["mode"])
	assert.False(t, f.b.Stopped(f.bot.ID, f.room.ID))

	status, e := f.admin(t, http.MethodPost, "/stop", map[string]any{"room": "nowhere"})
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found", e["code"])
	assert.Equal(t, []string{"stop:" + f.room.ID, "play:" + f.room.ID}, controlKinds(f.b.Events()))
}

// controlKinds lists the control events as kind:room.
func controlKinds(events []fakeband.Event) []string {
	var out []string
	for _, e := range events {
		switch e.Kind {
		case fakeband.EventStop, fakeband.EventPlay, fakeband.EventInterrupt, fakeband.EventSupersede, fakeband.EventDrop:
			out = append(out, e.Kind+":"+e.RoomID)
		}
	}
	return out
}

func TestAdminInterrupt(t *testing.T) {
	f := newAdminFixture(t)
	helper := f.b.AddAgent("Helper")
	require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
	other := f.b.AddRoom("other", f.alice, helper.ID)

	status, out := f.admin(t, http.MethodPost, "/interrupt", map[string]any{"agent": "Bot"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, map[string]any{"agent_ids": []any{f.bot.ID}, "room_id": nil}, out, "agent-wide")

	status, out = f.admin(t, http.MethodPost, "/interrupt", map[string]any{"room": "general"})
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"agent_ids": []any{f.bot.ID, helper.ID}, "room_id": f.room.ID}, out, "every agent of the room")

	status, out = f.admin(t, http.MethodPost, "/interrupt", map[string]any{"agent": "Helper", "room": "other"})
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"agent_ids": []any{helper.ID}, "room_id": other.ID}, out)

	for name, tc := range map[string]struct {
		body   any
		status int
	}{
		"neither":            {map[string]any{}, http.StatusUnprocessableEntity},
		"not in the room":    {map[string]any{"agent": "Bot", "room": "other"}, http.StatusNotFound},
		"a human":            {map[string]any{"agent": "Alice"}, http.StatusUnprocessableEntity},
		"nobody of the kind": {map[string]any{"agent": "Zed"}, http.StatusNotFound},
	} {
		status, e := f.admin(t, http.MethodPost, "/interrupt", tc.body)
		assert.Equal(t, tc.status, status, "%s: %v", name, e)
	}
	assert.Equal(t, []string{"interrupt:", "interrupt:" + f.room.ID, "interrupt:" + f.room.ID, "interrupt:" + other.ID},
		controlKinds(f.b.Events()), "refusals push nothing")
}

func TestAdminDropAndSupersede(t *testing.T) {
	f := newAdminFixture(t)
	status, out := f.admin(t, http.MethodPost, "/drop", map[string]any{"agent": f.bot.Handle})
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"agent_id": f.bot.ID}, out)
	status, _ = f.admin(t, http.MethodPost, "/supersede", map[string]any{"agent": "bot"})
	require.Equal(t, http.StatusOK, status)
	status, _ = f.admin(t, http.MethodPost, "/drop", map[string]any{"agent": "Bob"})
	assert.Equal(t, http.StatusUnprocessableEntity, status, "only agents have sockets")
	assert.Equal(t, []string{"drop:", "supersede:"}, controlKinds(f.b.Events()))
}

func TestAdminFaults(t *testing.T) {
	f := newAdminFixture(t)
	status, faults := f.admin(t, http.MethodPost, "/faults", `{
		"request": [{"endpoint": "me", "kind": "fail_before", "nth": 1, "status": 429, "empty_body": true}],
		"socket": [{"event": "agent.control", "kind": "lose_push", "nth": 1}]}`)
	require.Equal(t, http.StatusOK, status, "%v", faults)
	assert.Equal(t, []any{map[string]any{"endpoint": "me", "kind": "fail_before", "nth": float64(1), "status": float64(429), "empty_body": true}}, faults["request"])
	assert.Equal(t, []any{map[string]any{"event": "agent.control", "kind": "lose_push", "nth": float64(1)}}, faults["socket"])

	assert.Equal(t, http.StatusTooManyRequests, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	status, faults = f.admin(t, http.MethodGet, "/faults", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"me/fail_before": float64(1)}, faults["fired"])

	for name, body := range map[string]string{
		"a rule that never fires": `{"request": [{"kind": "lose_response"}]}`,
		"an unknown endpoint":     `{"request": [{"endpoint": "nope", "kind": "lose_response", "nth": 1}]}`,
	} {
		status, e := f.admin(t, http.MethodPost, "/faults", body)
		assert.Equal(t, http.StatusUnprocessableEntity, status, name)
		assert.Equal(t, "invalid_fault", e["code"], name)
		assert.Contains(t, e["message"], "invalid fault", name)
	}
	status, e := f.admin(t, http.MethodPost, "/faults", `{}`)
	assert.Equal(t, http.StatusBadRequest, status, "an empty plan is a mistake: %v", e)
	status, e = f.admin(t, http.MethodPost, "/faults", `{"requests": []}`)
	assert.Equal(t, http.StatusBadRequest, status, "a typo: %v", e)

	_, faults = f.admin(t, http.MethodGet, "/faults", nil)
	assert.Len(t, faults["request"], 1, "refused plans added nothing")

	status, faults = f.admin(t, http.MethodDelete, "/faults", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, faults["request"])
	assert.Empty(t, faults["socket"])
	assert.Equal(t, map[string]any{"me/fail_before": float64(1)}, faults["fired"], "the histogram is kept")
}

func TestAdminTruthIsTheGroundTruth(t *testing.T) {
	f := newAdminFixture(t)
	first := f.say(t, "first")
	second := f.say(t, "second")
	require.Equal(t, 200, f.mark(t, first, "processing", nil).status)
	require.Equal(t, 201, f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("echo", map[string]any{"id": f.alice.ID})).status)
	require.Equal(t, 200, f.mark(t, first, "processed", nil).status)
	require.Equal(t, 200, f.mark(t, second, "processing", nil).status)
	require.Equal(t, 200, f.mark(t, second, "failed", map[string]any{"error": "boom"}).status)
	require.NoError(t, f.b.StopRoom(f.room.ID))

	status, truth := f.admin(t, http.MethodGet, "/truth", nil)
	require.Equal(t, http.StatusOK, status)
	rooms := truth["rooms"].([]any)
	require.Len(t, rooms, 1)
	posts := rooms[0].(map[string]any)["posts"].([]any)
	require.Len(t, posts, 3)
	reply := posts[2].(map[string]any)
	assert.Equal(t, f.bot.ID, reply["sender_id"])
	assert.Equal(t, "Agent", reply["sender_type"])
	assert.Equal(t, "@[["+f.alice.ID+"]] echo", reply["content"])
	assert.Equal(t, []any{f.alice.ID}, reply["mentions"])

	var statuses []string
	for _, d := range truth["deliveries"].([]any) {
		d := d.(map[string]any)
		statuses = append(statuses, d["status"].(string))
	}
	assert.Equal(t, []string{"processed", "failed", "delivered"}, statuses, "bot's two, then alice's reply")

	var marks []string
	for _, m := range truth["marks"].([]any) {
		m := m.(map[string]any)
		marks = append(marks, m["kind"].(string))
	}
	assert.Equal(t, []string{"processing", "processed", "processing", "failed"}, marks, "in the global order")
	last := truth["marks"].([]any)[3].(map[string]any)
	assert.Equal(t, "boom", last["error"])
	assert.Equal(t, second, last["message_id"])

	execs := truth["executions"].([]any)
	require.Len(t, execs, 1)
	assert.Equal(t, true, execs[0].(map[string]any)["stopped"])
	assert.Equal(t, map[string]any{"processing": float64(2), "processed": float64(1), "failed": float64(1), "post": float64(1)}, truth["requests"],
		"admin calls are not Band requests")
	assert.NotEmpty(t, truth["events"])
	assert.Equal(t, map[string]any{}, truth["faults_fired"])
}

func TestAdminAfterCloseIs503(t *testing.T) {
	f := newAdminFixture(t)
	require.NoError(t, f.b.Close())
	status, e := f.admin(t, http.MethodGet, "/truth", nil)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "unavailable", e["code"])
}

// The admin API adds and removes participants and sets a description,
// naming them as a person would; the truth shows the room's participants
// and its events.
func TestAdminChangesParticipantsAndDescriptions(t *testing.T) {
	f := newAdminFixture(t)
	helper := f.b.AddAgent("Helper")
	status, added := f.admin(t, http.MethodPost, "/participants", map[string]any{"room": "general", "participant": "helper", "role": "admin"})
	require.Equal(t, http.StatusOK, status, "%v", added)
	assert.Equal(t, map[string]any{"room_id": f.room.ID, "participant_id": helper.ID, "role": "admin"}, added)
	assert.Contains(t, f.b.Members(f.room.ID), fakeband.Member{ID: helper.ID, Name: "Helper", Handle: helper.Handle, Type: "Agent", Role: "admin"})

	status, bad := f.admin(t, http.MethodPost, "/participants", map[string]any{"room": "general", "participant": "helper", "role": "boss"})
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	assert.Equal(t, "validation_error", bad["code"])

	status, _ = f.admin(t, http.MethodDelete, "/participants", map[string]any{"room": "general", "participant": "Bob"})
	require.Equal(t, http.StatusOK, status)
	status, gone := f.admin(t, http.MethodDelete, "/participants", map[string]any{"room": "general", "participant": "Bob"})
	assert.Equal(t, http.StatusNotFound, status, "%v", gone)

	status, _ = f.admin(t, http.MethodPost, "/description", map[string]any{"agent": "Bot", "description": "says hi"})
	require.Equal(t, http.StatusOK, status)
	me := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).data(t)
	assert.Equal(t, "says hi", me["description"])
	status, _ = f.admin(t, http.MethodPost, "/description", map[string]any{"agent": "Bob", "description": "x"})
	assert.Equal(t, http.StatusUnprocessableEntity, status, "a human has no description")

	_, err := f.b.PostEvent(f.room.ID, f.bot.ID, "thought", "hmm", nil)
	require.NoError(t, err)
	_, truth := f.admin(t, http.MethodGet, "/truth", nil)
	room := truth["rooms"].([]any)[0].(map[string]any)
	var names []string
	for _, p := range room["participants"].([]any) {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"Alice", "Bot", "Helper"}, names)
	events := room["chat_events"].([]any)
	require.Len(t, events, 1)
	assert.Equal(t, "thought", events[0].(map[string]any)["message_type"])
}

// Every field name docs/fakeband.md gives the truth is one the truth has.
func TestTheTruthsFieldsAreTheOnesTheManualNames(t *testing.T) {
	f := newAdminFixture(t)
	msg := f.say(t, "hello")
	f.do(t, http.MethodPost, f.chat("/messages/"+msg+"/processing"), f.bot.Key, nil)
	f.do(t, http.MethodPost, f.chat("/events"), f.bot.Key, map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}})
	_, truth := f.admin(t, http.MethodGet, "/truth", nil)
	keys := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				keys[k] = true
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(truth)

	manual, err := os.ReadFile("../docs/fakeband.md")
	require.NoError(t, err)
	_, paragraph, ok := strings.Cut(string(manual), "The truth's fields: ")
	require.True(t, ok, "docs/fakeband.md lists the truth's fields")
	paragraph, _, _ = strings.Cut(paragraph, "\n\n")
	names := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(paragraph, -1)
	require.NotEmpty(t, names)
	for _, n := range names {
		assert.True(t, keys[n[1]], "docs/fakeband.md names the truth field %q, which the truth does not have", n[1])
	}
	// A room's own fields, named in the parenthesis after `rooms`.
	_, inRoom, _ := strings.Cut(paragraph, "`rooms` (")
	inRoom, _, _ = strings.Cut(inRoom, ")")
	room := truth["rooms"].([]any)[0].(map[string]any)
	for _, n := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(inRoom, -1) {
		assert.Contains(t, room, n[1], "docs/fakeband.md names a room's truth field %q", n[1])
	}
	assert.NotEmpty(t, room["chat_events"], "the event posted above shows")

	// The fields the manual's jq lines read from the truth.
	var read int
	for _, line := range strings.Split(string(manual), "\n") {
		_, query, ok := strings.Cut(line, "/_admin/truth | jq -c '")
		if !ok {
			continue
		}
		for _, n := range regexp.MustCompile(`[.{,:]\s*([a-z_]+)`).FindAllStringSubmatch(query, -1) {
			if n[1] != "data" {
				read++
				assert.True(t, keys[n[1]], "docs/fakeband.md's jq reads the truth field %q, which the truth does not have", n[1])
			}
		}
	}
	assert.Greater(t, read, 5, "the manual's jq lines were found")
}
