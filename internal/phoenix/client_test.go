package phoenix_test

import (
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

const (
	control = "agent_control:agent-1"
	rooms   = "agent_rooms:agent-1"
	room1   = "chat_room:r1"
)

func TestConnectJoinsAndDeliversPushesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		c.Join(rooms, rec.handler(rooms))
		require.False(t, c.Connected())
		run := start(t, c)
		synctest.Wait()

		require.True(t, c.Connected())
		require.Equal(t, 1, rec.connectedCount())
		conn := band.conn(0)
		assert.Equal(t, []string{control, rooms}, conn.joinedTopics())
		for _, j := range conn.framesOf(phoenix.EventJoin) {
			assert.Equal(t, j.frame.Ref, j.frame.JoinRef, "a join's join_ref is its own ref")
			assert.JSONEq(t, `{}`, string(j.frame.Payload))
		}

		up := band.upgradeLog()[0]
		assert.Equal(t, "band_a_secret", up.header.Get("X-Api-Key"))
		assert.Equal(t, map[string]string{"agent_id": "agent-1", "vsn": "2.0.0"}, up.query, "the key goes in the header only")

		conn.push(control, "agent.control", `{"mode":"stop"}`)
		conn.push(rooms, "room_added", `{"id":"r1"}`)
		conn.push(control, "agent.control", `{"mode":"play"}`)
		synctest.Wait()
		assert.Equal(t, []push{{"agent.control", `{"mode":"stop"}`}, {"agent.control", `{"mode":"play"}`}}, rec.pushesOn(control))
		assert.Equal(t, []push{{"room_added", `{"id":"r1"}`}}, rec.pushesOn(rooms))

		run.stop(t)
		assert.False(t, c.Connected())
		errs := rec.disconnectErrs()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], errTestOver)
		assert.Empty(t, rec.joinErrs())
	})
}

func TestURLQueryIsKeptAndPushWithoutJoinRefIsDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.URL = "wss://band.invalid/api/v1/socket/websocket?on_conflict=reject"
		c := phoenix.New(cfg)
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()
		assert.Equal(t, "reject", band.upgradeLog()[0].query["on_conflict"])

		// Broadcasts (fastlane) carry a null join_ref.
		band.conn(0).write(t.Context(), phoenix.Frame{Topic: control, Event: "agent.control", Payload: json.RawMessage(`{"n":1}`)})
		synctest.Wait()
		assert.Equal(t, []push{{"agent.control", `{"n":1}`}}, rec.pushesOn(control))
		run.stop(t)
	})
}

func TestPushRightAfterJoinReplyReachesTheHandlerRegisteredBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.pushOnJoin[control] = "agent.control"
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()
		assert.Equal(t, []push{{"agent.control", `{"on":"join"}`}}, rec.pushesOn(control))
		run.stop(t)
	})
}

func TestRefusedJoinIsReportedAndStillCountsAsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.refuseJoin[room1] = json.RawMessage(`{"reason":"unauthorized"}`)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		c.Join(room1, rec.handler(room1))
		run := start(t, c)
		synctest.Wait()

		require.Equal(t, []joinError{{room1, `{"reason":"unauthorized"}`}}, rec.joinErrs())
		assert.Equal(t, 1, rec.connectedCount(), "OnConnected waits for the refusal, then fires")
		conn := band.conn(0)
		conn.write(t.Context(), phoenix.Frame{Topic: room1, Event: "message_created", Payload: json.RawMessage(`{}`)})
		conn.push(control, "agent.control", `{}`)
		synctest.Wait()
		assert.Empty(t, rec.pushesOn(room1), "a refused topic is not joined")
		assert.Len(t, rec.pushesOn(control), 1)

		time.Sleep(10 * time.Minute) // no rejoin of a refused topic on the same connection
		synctest.Wait()
		assert.Equal(t, []string{control, room1}, conn.joinedTopics())
		assert.Equal(t, 1, band.connCount())
		run.stop(t)
	})
}

func TestJoinWhileConnectedJoinsNowAndAfterReconnectInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()

		c.Join(room1, rec.handler(room1))
		synctest.Wait()
		conn := band.conn(0)
		assert.Equal(t, []string{control, room1}, conn.joinedTopics())
		conn.push(room1, "message_created", `{"id":"m1"}`)
		synctest.Wait()
		assert.Equal(t, []push{{"message_created", `{"id":"m1"}`}}, rec.pushesOn(room1))

		// Joining again only swaps the handler.
		var swapped []string
		c.Join(room1, func(event string, _ json.RawMessage) { swapped = append(swapped, event) })
		conn.push(room1, "message_created", `{"id":"m2"}`)
		synctest.Wait()
		assert.Equal(t, []string{"message_created"}, swapped)
		assert.Equal(t, []string{control, room1}, conn.joinedTopics())

		conn.drop()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{control, room1}, band.conn(1).joinedTopics())
		assert.Equal(t, 2, rec.connectedCount())
		run.stop(t)
	})
}

func TestLeaveSendsPhxLeaveAndStopsDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		c.Join(room1, rec.handler(room1))
		run := start(t, c)
		synctest.Wait()
		conn := band.conn(0)
		roomJoinRef := conn.framesOf(phoenix.EventJoin)[1].frame.Ref

		c.Leave(room1)
		c.Leave("never:joined") // a no-op
		synctest.Wait()
		leaves := conn.framesOf(phoenix.EventLeave)
		require.Len(t, leaves, 1)
		assert.Equal(t, room1, leaves[0].frame.Topic)
		assert.Equal(t, roomJoinRef, leaves[0].frame.JoinRef)
		assert.Greater(t, refNumber(t, leaves[0].frame.Ref), refNumber(t, roomJoinRef))

		// The server's phx_close after the leave must not cause a rejoin,
		// and a straggling push for the left topic is not delivered.
		conn.write(t.Context(), phoenix.Frame{JoinRef: roomJoinRef, Topic: room1, Event: "message_created", Payload: json.RawMessage(`{}`)})
		conn.push(control, "agent.control", `{}`)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		assert.Empty(t, rec.pushesOn(room1))
		assert.Len(t, rec.pushesOn(control), 1)
		assert.Equal(t, []string{control, room1}, conn.joinedTopics())

		conn.drop()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{control}, band.conn(1).joinedTopics(), "a left topic is not rejoined")
		run.stop(t)
	})
}

func TestServerEndedChannelIsRejoinedAfterBackoff(t *testing.T) {
	for _, event := range []string{phoenix.EventError, phoenix.EventClose} {
		t.Run(event, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				band := newFakeBand(t)
				rec := newRecorder()
				c := phoenix.New(rec.config(band))
				c.Join(control, rec.handler(control))
				c.Join(room1, rec.handler(room1))
				run := start(t, c)
				synctest.Wait()
				conn := band.conn(0)
				oldRef := conn.framesOf(phoenix.EventJoin)[1].frame.Ref

				// One for an older join is ignored.
				conn.write(t.Context(), phoenix.Frame{JoinRef: "999999", Topic: room1, Event: event})
				time.Sleep(time.Minute)
				synctest.Wait()
				require.Len(t, conn.framesOf(phoenix.EventJoin), 2)

				endedAt := time.Now()
				conn.push(room1, event, `{}`)
				time.Sleep(time.Second) // the first rejoin waits less than ReconnectBase
				synctest.Wait()
				joins := conn.framesOf(phoenix.EventJoin)
				require.Len(t, joins, 3)
				rejoin := joins[2]
				assert.Equal(t, room1, rejoin.frame.Topic)
				assert.Less(t, rejoin.at.Sub(endedAt), time.Second)
				assert.Greater(t, refNumber(t, rejoin.frame.Ref), refNumber(t, oldRef))
				assert.Equal(t, 1, band.connCount(), "only the channel is rejoined, not the socket")

				conn.write(t.Context(), phoenix.Frame{JoinRef: oldRef, Topic: room1, Event: "stale", Payload: json.RawMessage(`{}`)})
				conn.push(room1, "fresh", `{}`)
				synctest.Wait()
				assert.Equal(t, []push{{"fresh", `{}`}}, rec.pushesOn(room1))
				run.stop(t)
			})
		})
	}
}

func TestBadFramesAreLoggedAndSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()
		conn := band.conn(0)
		for _, bad := range []string{`not json`, `[1,2]`, `[null,null,"","x",{}]`, `[{},null,"t","e",{}]`, `{"a":1}`, ``} {
			conn.writeRaw(t.Context(), websocket.MessageText, []byte(bad))
		}
		conn.writeRaw(t.Context(), websocket.MessageBinary, []byte{0, 1, 2})
		// A reply to nothing and a push on an unknown topic are dropped.
		conn.write(t.Context(), phoenix.Frame{Ref: "424242", Topic: control, Event: phoenix.EventReply, Payload: json.RawMessage(`{"status":"ok","response":{}}`)})
		conn.write(t.Context(), phoenix.Frame{Topic: "elsewhere", Event: "x", Payload: json.RawMessage(`{}`)})
		conn.push(control, "agent.control", `{"ok":true}`)
		synctest.Wait()

		assert.Equal(t, []push{{"agent.control", `{"ok":true}`}}, rec.pushesOn(control))
		assert.Equal(t, 1, band.connCount())
		assert.True(t, c.Connected())
		logs := rec.logs.String()
		assert.Contains(t, logs, `level=WARN msg="phoenix: skipping a bad frame"`)
		assert.Contains(t, logs, `level=WARN msg="phoenix: skipping a binary message"`)
		run.stop(t)
	})
}

func TestOversizedFrameClosesTheConnectionAndReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()
		huge := make([]byte, phoenix.MaxFrameSize+1)
		for i := range huge {
			huge[i] = ' '
		}
		band.conn(0).writeRaw(t.Context(), websocket.MessageText, huge)
		synctest.Wait()
		errs := rec.disconnectErrs()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], phoenix.ErrConnectionLost)

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 2, band.connCount())
		assert.Equal(t, 2, rec.connectedCount())
		run.stop(t)
	})
}

func TestCancelEndsRunPromptlyInEveryPhase(t *testing.T) {
	t.Run("connected", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			rec := newRecorder()
			c := phoenix.New(rec.config(band))
			c.Join(control, rec.handler(control))
			run := start(t, c)
			synctest.Wait()
			run.stop(t)
			assert.False(t, c.Connected())
		})
	})
	t.Run("waiting to retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			band.refuse(429, nil, `{"error":{"code":"too_many_requests","retry_after":30}}`)
			rec := newRecorder()
			run := start(t, phoenix.New(rec.config(band)))
			synctest.Wait()
			run.stop(t)
			assert.Len(t, band.upgradeLog(), 1)
			assert.Empty(t, rec.disconnectErrs(), "never connected, so never disconnected")
		})
	})
	t.Run("before start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			run := start(t, phoenix.New(newRecorder().config(band)))
			run.stop(t)
		})
	})
}

func TestRunRejectsABadURLAndASecondRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		for _, u := range []string{"ftp://band.invalid/socket", "ws:///nohost", "::"} {
			cfg := rec.config(band)
			cfg.URL = u
			err := phoenix.New(cfg).Run(t.Context())
			assert.ErrorIs(t, err, phoenix.ErrBadURL, u)
		}
		assert.Empty(t, band.upgradeLog())

		c := phoenix.New(rec.config(band))
		run := start(t, c)
		synctest.Wait()
		assert.ErrorIs(t, c.Run(t.Context()), phoenix.ErrAlreadyRunning)
		run.stop(t)
	})
}

func TestReservedTopicsAndNilHandlerAreHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		c.Join("", rec.handler(""))
		c.Join(phoenix.TopicPhoenix, rec.handler(phoenix.TopicPhoenix))
		c.Join(room1, nil)
		run := start(t, c)
		synctest.Wait()
		conn := band.conn(0)
		assert.Equal(t, []string{room1}, conn.joinedTopics())
		conn.push(room1, "message_created", `{}`)
		synctest.Wait()
		assert.True(t, c.Connected())
		run.stop(t)
	})
}

// isConnLost reports whether every error is a lost connection.
func allConnLost(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, phoenix.ErrConnectionLost) {
			return false
		}
	}
	return true
}
