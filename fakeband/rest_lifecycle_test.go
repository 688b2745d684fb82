package fakeband_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextServesTheOldestUnprocessedDelivery(t *testing.T) {
	f := newFixture(t)
	next := func() response { return f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil) }

	empty := next()
	require.Equal(t, http.StatusNoContent, empty.status)
	assert.Empty(t, empty.raw)

	carol := f.b.AddHuman("Carol")
	require.NoError(t, f.b.AddParticipant(f.room.ID, carol.ID))
	_, err := f.b.Say(f.room.ID, f.alice.ID, "not for the bot", carol.ID)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, next().status, "a message that does not mention the bot is not delivered to it")

	first := f.say(t, "one")
	second := f.say(t, "two")
	assert.Equal(t, first, next().data(t)["id"], "reading does not advance")
	assert.Equal(t, first, next().data(t)["id"])

	require.Equal(t, http.StatusOK, f.mark(t, first, "processing", nil).status)
	assert.Equal(t, first, next().data(t)["id"], "processing is served again")
	require.Equal(t, http.StatusOK, f.mark(t, first, "failed", map[string]any{"error": "boom"}).status)
	assert.Equal(t, first, next().data(t)["id"], "failed is served again")
	require.Equal(t, http.StatusOK, f.mark(t, first, "processing", nil).status)
	require.Equal(t, http.StatusOK, f.mark(t, first, "processed", nil).status)
	assert.Equal(t, second, next().data(t)["id"], "only processed leaves the queue")

	f.mark(t, second, "processing", nil)
	f.mark(t, second, "processed", nil)
	assert.Equal(t, http.StatusNoContent, next().status)
}

func TestNextIs404OutsideTheAgentsRooms(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddRoom("other", f.alice)
	for name, roomID := range map[string]string{"unknown room": "00000000-0000-4000-8000-000000000000", "not a participant": other.ID} {
		t.Run(name, func(t *testing.T) {
			resp := f.do(t, http.MethodGet, "/agent/chats/"+roomID+"/messages/next", f.bot.Key, nil)
			require.Equal(t, http.StatusNotFound, resp.status)
			assert.Equal(t, "not_found", resp.errorCode(t))
		})
	}
	require.NoError(t, f.b.RemoveParticipant(f.room.ID, f.bot.ID))
	assert.Equal(t, http.StatusNotFound, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).status)
}

func TestNextDoesNotServeTheAgentsOwnPosts(t *testing.T) {
	f := newFixture(t)
	resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi", map[string]any{"id": f.alice.ID}))
	require.Equal(t, http.StatusCreated, resp.status)
	assert.Equal(t, http.StatusNoContent, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).status)
}

func TestMarksFollowTheAttemptRules(t *testing.T) {
	type step struct {
		kind   string
		body   any
		status int
		code   string // error code, or "" on success
		state  string // status field of a success
		n      int    // attempt_number of a success
	}
	fail := map[string]any{"error": "boom"}
	tests := []struct {
		name  string
		steps []step
	}{
		{"processed needs an attempt", []step{{kind: "processed", status: 422, code: "no_active_attempt"}}},
		{"failed needs an attempt", []step{{kind: "failed", body: fail, status: 422, code: "no_active_attempt"}}},
		{"every processing opens a new attempt", []step{
			{kind: "processing", status: 200, state: "processing", n: 1},
			{kind: "processing", status: 200, state: "processing", n: 2},
			{kind: "processing", status: 200, state: "processing", n: 3},
			{kind: "processed", status: 200, state: "processed", n: 3},
		}},
		{"failed closes the attempt", []step{
			{kind: "processing", status: 200, state: "processing", n: 1},
			{kind: "failed", body: fail, status: 200, state: "failed", n: 1},
			{kind: "processed", status: 422, code: "no_active_attempt"},
			{kind: "failed", body: fail, status: 422, code: "no_active_attempt"},
			{kind: "processing", status: 200, state: "processing", n: 2},
			{kind: "processed", status: 200, state: "processed", n: 2},
		}},
		{"processed is terminal", []step{
			{kind: "processing", status: 200, state: "processing", n: 1},
			{kind: "processed", status: 200, state: "processed", n: 1},
			{kind: "processed", status: 422, code: "no_active_attempt"},
			{kind: "processing", status: 422, code: "already_processed"},
		}},
		{"failed needs a reason", []step{
			{kind: "processing", status: 200, state: "processing", n: 1},
			{kind: "failed", status: 422, code: "validation_error"},
			{kind: "failed", body: map[string]any{"error": ""}, status: 422, code: "validation_error"},
			{kind: "failed", body: map[string]any{"error": " \u200b "}, status: 422, code: "validation_error"},
			{kind: "failed", body: map[string]any{"error": 7}, status: 422, code: "validation_error"},
			{kind: "failed", body: "{", status: 422, code: "validation_error"},
			{kind: "failed", body: fail, status: 200, state: "failed", n: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			msg := f.say(t, "work")
			for i, s := range tt.steps {
				resp := f.mark(t, msg, s.kind, s.body)
				require.Equal(t, s.status, resp.status, "step %d %s: %s", i, s.kind, resp.raw)
				if s.code != "" {
					assert.Equal(t, s.code, resp.errorCode(t), "step %d", i)
					continue
				}
				assert.Equal(t, map[string]any{"id": msg, "status": s.state, "attempt_number": float64(s.n), "success": true}, resp.data(t), "step %d", i)
			}
		})
	}
}

func TestMarksNeedAMessageDeliveredToTheAgentInThatRoom(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	other := f.b.AddRoom("other", f.alice, f.bot.ID)
	own := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("mine", map[string]any{"id": f.alice.ID})).data(t)["id"].(string)
	tests := map[string]string{
		"unknown message":         f.chat("/messages/00000000-0000-4000-8000-000000000000/processing"),
		"message of another room": "/agent/chats/" + other.ID + "/messages/" + msg + "/processing",
		"the agent's own message": f.chat("/messages/" + own + "/processing"),
		"unknown room":            "/agent/chats/nope/messages/" + msg + "/processing",
	}
	for name, path := range tests {
		t.Run(name, func(t *testing.T) {
			resp := f.do(t, http.MethodPost, path, f.bot.Key, nil)
			require.Equal(t, http.StatusNotFound, resp.status, "%s", resp.raw)
			assert.Equal(t, "not_found", resp.errorCode(t))
			failed := strings.TrimSuffix(path, "processing") + "failed"
			resp = f.do(t, http.MethodPost, failed, f.bot.Key, "not json")
			require.Equal(t, http.StatusNotFound, resp.status, "404 comes before the body check")
			resp = f.do(t, http.MethodPost, strings.TrimSuffix(path, "processing")+"processed", f.bot.Key, nil)
			require.Equal(t, http.StatusNotFound, resp.status, "%s", resp.raw)
			assert.Equal(t, "not_found", resp.errorCode(t))
		})
	}
}
