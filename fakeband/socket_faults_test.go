package fakeband_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/phoenix"
)

// joinedBot dials the bot and joins its room and control topics.
func joinedBot(t *testing.T, f *fixture) *socketClient {
	t.Helper()
	c := dialSocket(t, f.b, f.bot.Key)
	c.mustJoin("chat_room:" + f.room.ID)
	c.mustJoin("agent_control:" + f.bot.ID)
	return c
}

func TestLosePushSkipsOnePush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := joinedBot(t, f)
		f.b.InjectSocket(fakeband.SocketFault{Event: "message_created", Nth: 2, Kind: fakeband.LosePush})
		first, _, third := f.say(t, "1"), f.say(t, "2"), f.say(t, "3")
		require.NoError(t, f.b.StopRoom(f.room.ID)) // another event: not counted
		assert.Equal(t, first, payload(t, c.next())["id"])
		assert.Equal(t, third, payload(t, c.next())["id"])
		assert.Equal(t, "agent.control", c.next().Event)
		c.requireQuiet()
		assert.Equal(t, map[string]int{"socket/lose_push": 1}, f.b.FaultsFired())
	})
}

func TestDuplicatePushDeliversTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := joinedBot(t, f)
		f.b.InjectSocket(fakeband.SocketFault{Event: "agent.control", Nth: 1, Kind: fakeband.DuplicatePush})
		require.NoError(t, f.b.StopRoom(f.room.ID))
		one, two := c.next(), c.next()
		assert.Equal(t, one, two)
		assert.Equal(t, "ctl-1", payload(t, one)["correlation_id"], "the duplicate carries the same correlation id")
		c.requireQuiet()
	})
}

func TestDelayPushHoldsTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := joinedBot(t, f)
		f.b.InjectSocket(fakeband.SocketFault{Nth: 1, Kind: fakeband.DelayPush, Delay: 5 * time.Second})
		first := f.say(t, "late")
		second := f.say(t, "behind it")
		time.Sleep(5*time.Second - time.Nanosecond)
		c.requireQuiet()
		time.Sleep(time.Nanosecond)
		assert.Equal(t, first, payload(t, c.next())["id"])
		assert.Equal(t, second, payload(t, c.next())["id"], "order is kept")
	})
}

func TestDropConnectionClosesAtThePush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := joinedBot(t, f)
		f.b.InjectSocket(fakeband.SocketFault{Nth: 2, Kind: fakeband.DropConnection})
		first := f.say(t, "delivered")
		f.say(t, "the drop")
		f.say(t, "after the drop")
		synctest.Wait()
		frames, closed := c.pending()
		require.Len(t, frames, 1)
		assert.Equal(t, first, payload(t, frames[0])["id"])
		assert.True(t, closed)
		assert.Len(t, f.b.Posts(f.room.ID), 3, "the posts themselves were applied")
		assert.Equal(t, map[string]int{"socket/drop_connection": 1}, f.b.FaultsFired())
	})
}

// socketFaultPattern reports which of n pushes a 50% LosePush dropped.
func socketFaultPattern(t *testing.T, seed int64, n int) []bool {
	var lost []bool
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{Seed: seed})
		defer b.Close()
		alice, bot := b.AddHuman("Alice"), b.AddAgent("Bot")
		room := b.AddRoom("r", alice, bot.ID)
		c := dialSocket(t, b, bot.Key)
		c.mustJoin("chat_room:" + room.ID)
		b.InjectSocket(fakeband.SocketFault{Probability: 0.5, Kind: fakeband.LosePush})
		var ids []string
		for range n {
			id, err := b.Say(room.ID, alice.ID, "m", bot.ID)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		synctest.Wait()
		frames, _ := c.pending()
		got := map[string]bool{}
		for _, f := range frames {
			got[payload(t, f)["id"].(string)] = true
		}
		for _, id := range ids {
			lost = append(lost, !got[id])
		}
	})
	return lost
}

func TestSocketFaultProbabilityIsSeeded(t *testing.T) {
	a, b, c := socketFaultPattern(t, 5, 40), socketFaultPattern(t, 5, 40), socketFaultPattern(t, 6, 40)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	assert.Contains(t, a, true)
	assert.Contains(t, a, false)
}

func TestClearFaultsRemovesSocketFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := joinedBot(t, f)
		f.b.InjectSocket(fakeband.SocketFault{Probability: 1, Kind: fakeband.LosePush})
		f.say(t, "lost")
		f.b.ClearFaults()
		id := f.say(t, "kept")
		assert.Equal(t, id, payload(t, c.next())["id"])
	})
}

func TestRepliesAreNotSubjectToSocketFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		c := dialSocket(t, f.b, f.bot.Key)
		f.b.InjectSocket(fakeband.SocketFault{Probability: 1, Kind: fakeband.LosePush})
		c.mustJoin("chat_room:" + f.room.ID)
		ref := c.send("", phoenix.TopicPhoenix, phoenix.EventHeartbeat, map[string]any{})
		assert.Equal(t, ref, c.next().Ref)
	})
}

func TestUpgradeFaults(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointSocket, Nth: 1, Kind: fakeband.FailBefore, Status: 429, RetryAfter: "3"})
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointSocket, Nth: 2, Kind: fakeband.LoseResponse})
	h := http.Header{"X-Api-Key": {f.bot.Key}}

	_, resp, err := tryDial(f.b.HTTPClient(), f.b.SocketURL(), h)
	require.Error(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))

	_, _, err = tryDial(f.b.HTTPClient(), f.b.SocketURL(), h)
	assert.ErrorIs(t, err, fakeband.ErrResponseLost)

	ws, _, err := tryDial(f.b.HTTPClient(), f.b.SocketURL(), h)
	require.NoError(t, err)
	require.NoError(t, ws.CloseNow())
	assert.Equal(t, map[string]int{"socket/fail_before": 1, "socket/lose_response": 1}, f.b.FaultsFired())
}

func TestSocketFaultKindNames(t *testing.T) {
	assert.Equal(t, "drop_connection", fakeband.DropConnection.String())
	assert.Equal(t, "duplicate_push", fakeband.DuplicatePush.String())
	assert.Equal(t, "delay_push", fakeband.DelayPush.String())
	assert.Equal(t, "lose_push", fakeband.LosePush.String())
	assert.Equal(t, "SocketFaultKind(7)", fakeband.SocketFaultKind(7).String())
}
