package fakeband_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/phoenix"
)

func TestASecondConnectionSupersedesTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		first := dialSocket(t, f.b, f.bot.Key)
		firstRef := first.mustJoin("agent_control:" + f.bot.ID)
		first.mustJoin("chat_room:" + f.room.ID)

		second := dialSocket(t, f.b, f.bot.Key)
		sup := first.next()
		assert.Equal(t, "supersede", sup.Event)
		assert.Equal(t, "agent_control:"+f.bot.ID, sup.Topic)
		assert.Equal(t, firstRef, sup.JoinRef)
		p := payload(t, sup)
		assert.Equal(t, false, p["retryable"])
		assert.NotEmpty(t, p["reason"])
		assert.NotEmpty(t, p["message"])
		synctest.Wait()
		frames, closed := first.pending()
		assert.Empty(t, frames)
		assert.True(t, closed, "the older connection is closed after the push")
		assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(first.err), "with a close handshake")

		second.mustJoin("chat_room:" + f.room.ID)
		id := f.say(t, "to the new connection")
		assert.Equal(t, id, payload(t, second.next())["id"])
		second.requireQuiet()

		var kinds []string
		for _, e := range f.b.Events() {
			if e.Kind == fakeband.EventConnect || e.Kind == fakeband.EventSupersede {
				kinds = append(kinds, e.Kind)
			}
		}
		assert.Equal(t, []string{"connect", "supersede", "connect"}, kinds)
	})
}

func TestSupersedeMethodPushesAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		c.mustJoin("agent_control:" + f.bot.ID)
		f.b.Supersede(f.bot.ID)
		assert.Equal(t, "supersede", c.next().Event)
		synctest.Wait()
		_, closed := c.pending()
		assert.True(t, closed)
		assert.Equal(t, fakeband.EventSupersede, f.b.Events()[len(f.b.Events())-1].Kind)
	})
}

func TestSupersedeOfAConnectionThatDidNotJoinJustCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		first := dialSocket(t, f.b, f.bot.Key)
		// The client sees the upgrade before the server registers the
		// connection; let that finish, or the second may register first.
		synctest.Wait()
		dialSocket(t, f.b, f.bot.Key)
		synctest.Wait()
		frames, closed := first.pending()
		assert.Empty(t, frames)
		assert.True(t, closed)
	})
}

func TestDropSocketsClosesWithoutAPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		c.mustJoin("agent_control:" + f.bot.ID)
		f.b.DropSockets(f.bot.ID)
		synctest.Wait()
		frames, closed := c.pending()
		assert.Empty(t, frames)
		assert.True(t, closed)
		assert.Equal(t, websocket.StatusCode(-1), websocket.CloseStatus(c.err), "no close handshake")
		last := f.b.Events()[len(f.b.Events())-1]
		assert.Equal(t, fakeband.EventDrop, last.Kind)
		assert.Equal(t, "1", last.Detail)

		again := dialSocket(t, f.b, f.bot.Key)
		again.mustJoin("agent_control:" + f.bot.ID)
		require.NoError(t, f.b.StopRoom(f.room.ID))
		assert.Equal(t, "stop", payload(t, again.next())["mode"], "a reconnected agent gets pushes again")
	})
}

func TestCloseEndsSockets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{})
		bot := b.AddAgent("Bot")
		c := dialSocket(t, b, bot.Key)
		c.mustJoin("agent_control:" + bot.ID)
		require.NoError(t, b.Close())
		require.NoError(t, b.Close(), "Close is idempotent")
		synctest.Wait()
		_, closed := c.pending()
		assert.True(t, closed)
		_, resp, err := tryDial(b.HTTPClient(), b.SocketURL(), http.Header{"X-Api-Key": {bot.Key}})
		require.Error(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	})
}

func TestASlowSocketNeverBlocksTheAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ws, _, err := tryDial(f.b.HTTPClient(), f.b.SocketURL(), http.Header{"X-Api-Key": {f.bot.Key}})
		require.NoError(t, err)
		defer ws.CloseNow()
		// Join, then never read again: every push piles up in the outbox.
		c := &socketClient{t: t, ws: ws}
		c.send("1", "chat_room:"+f.room.ID, "phx_join", map[string]any{})
		for range 500 {
			f.say(t, "a message the client will not read")
		}
		assert.Len(t, f.b.Posts(f.room.ID), 500)
	})
}

func TestCloseEndsASupersededConnectionStuckOnASilentClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{})
		bot := b.AddAgent("Bot")
		silent, _, err := tryDial(b.HTTPClient(), b.SocketURL(), http.Header{"X-Api-Key": {bot.Key}})
		require.NoError(t, err)
		defer silent.CloseNow()
		(&socketClient{t: t, ws: silent}).send("1", "agent_control:"+bot.ID, "phx_join", map[string]any{})
		dialSocket(t, b, bot.Key) // supersedes the silent one, whose writer cannot finish
		synctest.Wait()
		start := time.Now()
		require.NoError(t, b.Close())
		assert.Zero(t, time.Since(start), "Close does not wait out the close handshake (virtual time)")
	})
}

func TestSupersedeAndDropAreRecordedWithoutConnections(t *testing.T) {
	f := newFixture(t)
	f.b.Supersede(f.bot.ID)
	f.b.DropSockets(f.bot.ID)
	events := f.b.Events()
	last := events[len(events)-2:]
	assert.Equal(t, fakeband.EventSupersede, last[0].Kind)
	assert.Equal(t, f.bot.ID, last[0].AgentID)
	assert.Equal(t, fakeband.Event{Seq: last[1].Seq, Kind: fakeband.EventDrop, AgentID: f.bot.ID, Detail: "0"}, last[1])
}

// A connection whose client stopped reading is superseded by a newer one
// of the same agent: Band closes the older connection. In the fake the
// older one's writer is blocked on the client with no deadline, so the
// close it queued behind the backlog is never written: the connection
// (its goroutines, its outbox, up to 16 MiB) lives on, and is still
// served, for as long as the client keeps it open. One key can so pile up
// any number of them.
func TestASupersededConnectionWhoseClientDoesNotReadIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{Seed: 1})
		defer b.Close()
		bot := b.AddAgent("Bot")
		old, _, err := tryDial(b.HTTPClient(), b.SocketURL(), http.Header{"X-Api-Key": {bot.Key}})
		require.NoError(t, err)
		defer old.CloseNow()
		// The old client sends heartbeats and reads nothing.
		for i := range 100 {
			data, err := phoenix.Encode(phoenix.Frame{Ref: string(rune('a' + i%26)), Topic: phoenix.TopicPhoenix, Event: phoenix.EventHeartbeat})
			require.NoError(t, err)
			require.NoError(t, old.Write(context.Background(), websocket.MessageText, data))
		}
		synctest.Wait()

		newer, _, err := tryDial(b.HTTPClient(), b.SocketURL(), http.Header{"X-Api-Key": {bot.Key}})
		require.NoError(t, err)
		defer newer.CloseNow()

		time.Sleep(time.Hour) // virtual: the bubble's clock
		synctest.Wait()

		// An hour after it was superseded, the old connection should be gone;
		// reading it must end in an error, not the backlog of an hour ago.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, data, err := old.Read(ctx)
		require.Error(t, err, "an hour after its supersede the old connection still serves its backlog: %s", data)
	})
}
