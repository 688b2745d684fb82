package fakeband_test

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestStopGatesNextAndPostsButNotMarks(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	require.Equal(t, http.StatusOK, f.mark(t, msg, "processing", nil).status)
	require.NoError(t, f.b.StopRoom(f.room.ID))
	assert.True(t, f.b.Stopped(f.bot.ID, f.room.ID))

	next := f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil)
	assert.Equal(t, http.StatusNoContent, next.status, "the platform gate hides the processing message")
	resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("reply", map[string]any{"id": f.alice.ID}))
	require.Equal(t, http.StatusForbidden, resp.status)
	assert.Equal(t, "execution_stopped", resp.errorCode(t))
	resp = f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, "{")
	assert.Equal(t, http.StatusForbidden, resp.status, "the gate is checked before the body")
	_, err := f.b.Say(f.room.ID, f.bot.ID, "reply", f.alice.ID)
	assert.ErrorIs(t, err, fakeband.ErrStopped)

	queued := f.say(t, "sent while stopped")
	assert.Equal(t, "delivered", f.b.Status(f.bot.ID, queued), "mentions while stopped are not lost")
	assert.Equal(t, http.StatusOK, f.mark(t, msg, "processing", nil).status, "marks keep working while stopped")

	require.NoError(t, f.b.PlayRoom(f.room.ID))
	assert.False(t, f.b.Stopped(f.bot.ID, f.room.ID))
	assert.Equal(t, msg, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).data(t)["id"],
		"after play the stopped message is served again, oldest first")
	assert.ErrorIs(t, f.b.StopRoom("nope"), fakeband.ErrNotFound)
	assert.ErrorIs(t, f.b.PlayRoom("nope"), fakeband.ErrNotFound)
}

func TestStopIsPerRoom(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddRoom("other", f.alice, f.bot.ID)
	_, err := f.b.Say(other.ID, f.alice.ID, "elsewhere", f.bot.ID)
	require.NoError(t, err)
	require.NoError(t, f.b.StopRoom(f.room.ID))
	assert.False(t, f.b.Stopped(f.bot.ID, other.ID))
	assert.Equal(t, http.StatusOK, f.do(t, http.MethodGet, "/agent/chats/"+other.ID+"/messages/next", f.bot.Key, nil).status)
}

func TestControlPushesAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		helper := f.b.AddAgent("Helper")
		require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
		c := dialSocket(t, f.b, f.bot.Key)
		topic := "agent_control:" + f.bot.ID
		joinRef := c.mustJoin(topic)
		execID := executionOf(t, f, f.bot.ID, f.room.ID)

		require.NoError(t, f.b.StopRoom(f.room.ID))
		stop := c.next()
		assert.Equal(t, "agent.control", stop.Event)
		assert.Equal(t, topic, stop.Topic)
		assert.Equal(t, joinRef, stop.JoinRef)
		assert.Empty(t, stop.Ref)
		assert.Equal(t, map[string]any{
			"type": "agent.control", "mode": "stop", "scope": "room", "agent_id": f.bot.ID,
			"room_id": f.room.ID, "execution_id": execID, "reason": "user_requested", "correlation_id": "ctl-1",
		}, payload(t, stop))

		require.NoError(t, f.b.PlayRoom(f.room.ID))
		play := payload(t, c.next())
		assert.Equal(t, "play", play["mode"])
		assert.Equal(t, "ctl-3", play["correlation_id"], "ctl-2 went to the helper")

		require.NoError(t, f.b.Interrupt(f.bot.ID, ""))
		assert.Equal(t, map[string]any{
			"type": "agent.control", "mode": "interrupt", "scope": "agent", "agent_id": f.bot.ID,
			"room_id": nil, "execution_id": nil, "reason": "user_requested", "correlation_id": "ctl-5",
		}, payload(t, c.next()))
		require.NoError(t, f.b.Interrupt(f.bot.ID, f.room.ID))
		scoped := payload(t, c.next())
		assert.Equal(t, "room", scoped["scope"])
		assert.Equal(t, f.room.ID, scoped["room_id"])
		assert.Equal(t, execID, scoped["execution_id"])
		c.requireQuiet()

		assert.ErrorIs(t, f.b.Interrupt(f.alice.ID, ""), fakeband.ErrNotFound, "humans are not interrupted")
		assert.ErrorIs(t, f.b.Interrupt(f.bot.ID, f.b.AddRoom("x", f.alice).ID), fakeband.ErrNotFound)

		var control []fakeband.Event
		for _, e := range f.b.Events() {
			switch e.Kind {
			case fakeband.EventStop, fakeband.EventPlay, fakeband.EventInterrupt:
				e.Seq = 0
				control = append(control, e)
			}
		}
		assert.Equal(t, []fakeband.Event{
			{Kind: "stop", AgentID: f.bot.ID, RoomID: f.room.ID, Detail: "ctl-1"},
			{Kind: "stop", AgentID: helper.ID, RoomID: f.room.ID, Detail: "ctl-2"},
			{Kind: "play", AgentID: f.bot.ID, RoomID: f.room.ID, Detail: "ctl-3"},
			{Kind: "play", AgentID: helper.ID, RoomID: f.room.ID, Detail: "ctl-4"},
			{Kind: "interrupt", AgentID: f.bot.ID, Detail: "ctl-5"},
			{Kind: "interrupt", AgentID: f.bot.ID, RoomID: f.room.ID, Detail: "ctl-6"},
		}, control)
	})
}

// executionOf lists the agent's executions as its owner and returns the
// one for the room.
func executionOf(t *testing.T, f *fixture, agentID, roomID string) string {
	t.Helper()
	resp := f.do(t, http.MethodGet, "/me/agents/"+agentID+"/executions", f.b.Owner().Key, nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.raw)
	for _, it := range resp.list(t) {
		e := it.(map[string]any)
		if e["room_id"] == roomID {
			return e["id"].(string)
		}
	}
	t.Fatalf("no execution for room %s", roomID)
	return ""
}

func TestHumanControlEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		carol := f.b.AddHuman("Carol")
		require.NoError(t, f.b.AddParticipant(f.room.ID, carol.ID))
		stranger := f.b.AddHuman("Stranger")
		helper := f.b.AddAgent("Helper")
		require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
		c := dialSocket(t, f.b, f.bot.Key)
		c.mustJoin("agent_control:" + f.bot.ID)
		stopPath := "/me/chats/" + f.room.ID + "/agents/stop"

		for _, tt := range []struct {
			name, key string
			status    int
			code      string
		}{
			{"a member who is not the owner", carol.Key, 403, "forbidden"},
			{"a non-member", stranger.Key, 404, "not_found"},
			{"an agent key", f.bot.Key, 403, "forbidden"},
		} {
			resp := f.do(t, http.MethodPost, stopPath, tt.key, nil)
			require.Equal(t, tt.status, resp.status, tt.name)
			assert.Equal(t, tt.code, resp.errorCode(t), tt.name)
		}
		c.requireQuiet()
		assert.False(t, f.b.Stopped(f.bot.ID, f.room.ID), "a refused stop changes nothing")

		resp := f.do(t, http.MethodPost, stopPath, f.alice.Key, nil)
		require.Equal(t, http.StatusOK, resp.status)
		assert.Equal(t, map[string]any{"id": f.room.ID, "mode": "stop", "agent_ids": []any{f.bot.ID, helper.ID}}, resp.data(t))
		assert.True(t, f.b.Stopped(helper.ID, f.room.ID), "stop fans out to every agent in the room")
		assert.Equal(t, "stop", payload(t, c.next())["mode"])

		owner := f.b.Owner()
		execs := f.do(t, http.MethodGet, "/me/agents/"+f.bot.ID+"/executions", owner.Key, nil)
		require.Equal(t, http.StatusOK, execs.status)
		require.Len(t, execs.list(t), 1)
		e := execs.list(t)[0].(map[string]any)
		assert.Equal(t, "stopped", e["status"])
		assert.Equal(t, f.room.ID, e["room_id"])
		assert.NotNil(t, e["stopped_at"])

		resp = f.do(t, http.MethodPost, "/me/chats/"+f.room.ID+"/agents/play", f.alice.Key, nil)
		require.Equal(t, http.StatusOK, resp.status)
		assert.Equal(t, "play", payload(t, c.next())["mode"])
		e = f.do(t, http.MethodGet, "/me/agents/"+f.bot.ID+"/executions", owner.Key, nil).list(t)[0].(map[string]any)
		assert.Equal(t, "running", e["status"])
		assert.Nil(t, e["stopped_at"])

		interrupt := "/me/agents/" + f.bot.ID + "/executions/" + e["id"].(string) + "/interrupt"
		resp = f.do(t, http.MethodPost, interrupt, owner.Key, nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.raw)
		assert.Equal(t, e["id"], resp.data(t)["id"])
		push := payload(t, c.next())
		assert.Equal(t, "interrupt", push["mode"])
		assert.Equal(t, "agent", push["scope"])
		assert.Nil(t, push["room_id"], "an agent-scope interrupt reaches every room")
		assert.Equal(t, e["id"], push["execution_id"])

		for _, tt := range []struct {
			name, method, path, key string
			status                  int
		}{
			{"executions as a non-owner", http.MethodGet, "/me/agents/" + f.bot.ID + "/executions", f.alice.Key, 403},
			{"executions of an unknown agent", http.MethodGet, "/me/agents/nope/executions", owner.Key, 404},
			{"executions of a human", http.MethodGet, "/me/agents/" + f.alice.ID + "/executions", owner.Key, 404},
			{"interrupt as a non-owner", http.MethodPost, interrupt, f.alice.Key, 403},
			{"interrupt an unknown execution", http.MethodPost, "/me/agents/" + f.bot.ID + "/executions/nope/interrupt", owner.Key, 404},
			{"interrupt another agent's execution", http.MethodPost, "/me/agents/" + helper.ID + "/executions/" + e["id"].(string) + "/interrupt", owner.Key, 404},
		} {
			resp := f.do(t, tt.method, tt.path, tt.key, nil)
			assert.Equal(t, tt.status, resp.status, tt.name)
		}
		c.requireQuiet()
		assert.Equal(t, 14, f.b.Requests()[fakeband.EndpointControl], "3 refused stops, stop, list, play, list, interrupt, 6 refusals")
	})
}
