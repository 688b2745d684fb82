package fakeband_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

func TestSocketUpgradeNeedsAnAgentKey(t *testing.T) {
	f := newFixture(t)
	withQuery := func(key string) string { return f.b.SocketURL() + "?vsn=2.0.0&api_key=" + url.QueryEscape(key) }
	tests := []struct {
		name   string
		url    string
		header string
		status int
	}{
		{"no key", f.b.SocketURL(), "", 403},
		{"unknown key", f.b.SocketURL(), "band_a_nope", 403},
		{"human key", f.b.SocketURL(), f.alice.Key, 403},
		{"header key", f.b.SocketURL(), f.bot.Key, 101},
		{"query key", withQuery(f.bot.Key), "", 101},
		{"header wins over query", withQuery(f.bot.Key), "band_a_nope", 403},
		{"header wins, query ignored", withQuery("band_a_nope"), f.bot.Key, 101},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("X-Api-Key", tt.header)
			}
			ws, resp, err := tryDial(f.b.HTTPClient(), tt.url, h)
			require.NotNil(t, resp)
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.status != 101 {
				require.Error(t, err)
				body, _ := io.ReadAll(resp.Body)
				assert.Empty(t, body, "Band's auth refusal has an empty body")
				return
			}
			require.NoError(t, err)
			require.NoError(t, ws.CloseNow())
		})
	}
	assert.Equal(t, 7, f.b.Requests()["socket"])
}

func TestSocketAnswersJoinsLeavesAndHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		other := f.b.AddRoom("other", f.alice)
		c := dialSocket(t, f.b, f.bot.Key)

		for _, topic := range []string{"agent_control:" + f.bot.ID, "agent_rooms:" + f.bot.ID, "chat_room:" + f.room.ID} {
			reply, r := c.join(topic)
			assert.Equal(t, "ok", r.Status, topic)
			assert.Equal(t, topic, reply.Topic)
			assert.Equal(t, reply.Ref, reply.JoinRef, "the reply carries the join's join_ref")
		}
		refusals := map[string]string{
			"agent_control:" + f.alice.ID: "unauthorized",
			"agent_rooms:" + f.alice.ID:   "unauthorized",
			"chat_room:" + other.ID:       "unauthorized",
			"chat_room:nope":              "unauthorized",
			"lobby:1":                     "unmatched topic",
			"phoenix":                     "unmatched topic",
		}
		for topic, reason := range refusals {
			_, r := c.join(topic)
			assert.Equal(t, "error", r.Status, topic)
			assert.JSONEq(t, `{"reason":"`+reason+`"}`, string(r.Response), topic)
		}

		ref := c.send("", phoenix.TopicPhoenix, phoenix.EventHeartbeat, map[string]any{})
		hb := c.next()
		assert.Equal(t, phoenix.Frame{Ref: ref, Topic: "phoenix", Event: "phx_reply", Payload: hb.Payload}, hb)
		assert.JSONEq(t, `{"status":"ok","response":{}}`, string(hb.Payload))

		topic := "chat_room:" + f.room.ID
		ref = c.send("", topic, phoenix.EventLeave, map[string]any{})
		leave := c.next()
		assert.Equal(t, ref, leave.Ref)
		assert.JSONEq(t, `{"status":"ok","response":{}}`, string(leave.Payload))
		closeFrame := c.next()
		assert.Equal(t, phoenix.EventClose, closeFrame.Event)
		assert.Equal(t, topic, closeFrame.Topic)

		ref = c.send("", topic, phoenix.EventLeave, map[string]any{})
		again := c.next()
		assert.Equal(t, ref, again.Ref)
		assert.JSONEq(t, `{"status":"error","response":{"reason":"unmatched topic"}}`, string(again.Payload), "no longer joined")

		require.NoError(t, c.ws.Write(t.Context(), websocket.MessageText, []byte("not a frame")))
		c.send("", topic, "custom_event", map[string]any{}) // ignored only on joined topics; here it is an error
		assert.Equal(t, "phx_reply", c.next().Event, "a garbled frame is dropped and the connection stays up")
		c.requireQuiet()
	})
}

func TestMessageCreatedIsPushedToMentionedAgentsAndEchoedToTheSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		carol := f.b.AddHuman("Carol")
		require.NoError(t, f.b.AddParticipant(f.room.ID, carol.ID))
		c := dialSocket(t, f.b, f.bot.Key)
		topic := "chat_room:" + f.room.ID
		joinRef := c.mustJoin(topic)

		id := f.say(t, "hello")
		push := c.next()
		assert.Equal(t, phoenix.Frame{JoinRef: joinRef, Topic: topic, Event: "message_created", Payload: push.Payload}, push,
			"a push has a null ref and the join's join_ref")
		assert.Equal(t, id, payload(t, push)["id"])
		assert.Equal(t, "@[["+f.bot.ID+"]] hello", payload(t, push)["content"])
		assert.Equal(t, "User", payload(t, push)["sender_type"])

		_, err := f.b.Say(f.room.ID, f.alice.ID, "not for the bot", carol.ID)
		require.NoError(t, err)
		c.requireQuiet()

		resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("my answer", map[string]any{"id": f.alice.ID}))
		require.Equal(t, http.StatusCreated, resp.status)
		echo := c.next()
		assert.Equal(t, "message_created", echo.Event)
		assert.Equal(t, resp.data(t)["id"], payload(t, echo)["id"])
		assert.Equal(t, f.bot.ID, payload(t, echo)["sender_id"])
		c.requireQuiet()
	})
}

func TestPushesOnlyReachJoinedTopics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		f.say(t, "not joined yet")
		require.NoError(t, f.b.StopRoom(f.room.ID))
		c.requireQuiet()
	})
}

func TestRoomAddedAndRemovedArePushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		topic := "agent_rooms:" + f.bot.ID
		c.mustJoin(topic)

		room := f.b.AddRoom("fresh", f.alice, f.bot.ID)
		added := c.next()
		assert.Equal(t, "room_added", added.Event)
		assert.Equal(t, topic, added.Topic)
		assert.Equal(t, room.ID, payload(t, added)["id"])
		assert.Equal(t, "fresh", payload(t, added)["title"])
		assert.NotEmpty(t, payload(t, added)["inserted_at"])

		require.NoError(t, f.b.RemoveParticipant(room.ID, f.bot.ID))
		removed := c.next()
		assert.Equal(t, "room_removed", removed.Event)
		assert.Equal(t, room.ID, payload(t, removed)["id"])
		assert.NotEmpty(t, payload(t, removed)["removed_at"])

		require.NoError(t, f.b.AddParticipant(room.ID, f.bot.ID))
		assert.Equal(t, "room_added", c.next().Event)
		require.NoError(t, f.b.AddParticipant(room.ID, f.alice.ID))
		c.requireQuiet()
	})
}

// A client that stops reading is dropped once more than the bound of
// frames has queued for it, as a server drops a consumer too slow to
// keep up: the fake's memory does not grow with what it will never read.
func TestAClientThatStopsReadingIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ws, _, err := tryDial(f.b.HTTPClient(), f.b.SocketURL(), http.Header{"X-Api-Key": {f.bot.Key}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.CloseNow() })
		ws.SetReadLimit(1 << 20)
		join, err := phoenix.Encode(phoenix.Frame{JoinRef: "1", Ref: "1", Topic: "chat_room:" + f.room.ID, Event: phoenix.EventJoin, Payload: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.NoError(t, ws.Write(t.Context(), websocket.MessageText, join))
		synctest.Wait()

		const said = 40 // of 512 KiB each: 20 MiB
		big := strings.Repeat("x", 512<<10)
		for range said {
			_, err := f.b.Say(f.room.ID, f.alice.ID, big, f.bot.ID)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		frames := 0
		for {
			if _, _, err = ws.Read(ctx); err != nil {
				break
			}
			frames++
		}
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the connection was dropped, not left open")
		assert.Less(t, frames, said, "the frames past the bound were never sent")
	})
}
