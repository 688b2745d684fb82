package phoenix_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

func TestHeartbeatIsSentEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.HeartbeatInterval = 10 * time.Second
		c := phoenix.New(cfg)
		c.Join(control, rec.handler(control))
		began := time.Now()
		run := start(t, c)
		synctest.Wait()
		conn := band.conn(0)

		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, conn.framesOf(phoenix.EventHeartbeat), "nothing before the first interval")

		time.Sleep(time.Nanosecond + 40*time.Second)
		synctest.Wait()
		beats := conn.framesOf(phoenix.EventHeartbeat)
		require.Len(t, beats, 5)
		last := 0
		for i, b := range beats {
			assert.Equal(t, began.Add(time.Duration(i+1)*10*time.Second), b.at, "heartbeat %d", i)
			assert.Equal(t, phoenix.TopicPhoenix, b.frame.Topic)
			assert.Empty(t, b.frame.JoinRef)
			assert.JSONEq(t, `{}`, string(b.frame.Payload))
			ref := refNumber(t, b.frame.Ref)
			assert.Greater(t, ref, last, "refs increase")
			last = ref
		}
		assert.Equal(t, 1, band.connCount(), "answered heartbeats keep the connection")
		assert.Empty(t, rec.disconnectErrs())
		run.stop(t)
	})
}

func TestUnansweredHeartbeatClosesAndReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.silentHeartbeat[0] = true
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.HeartbeatInterval = 10 * time.Second
		c := phoenix.New(cfg)
		c.Join(control, rec.handler(control))
		run := start(t, c)
		synctest.Wait()

		time.Sleep(20*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, rec.disconnectErrs(), "the first heartbeat may be answered until the second is due")
		assert.Len(t, band.conn(0).framesOf(phoenix.EventHeartbeat), 1)

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		errs := rec.disconnectErrs()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], phoenix.ErrHeartbeatTimeout)
		assert.False(t, c.Connected())
		assert.Len(t, band.conn(0).framesOf(phoenix.EventHeartbeat), 1, "the overdue tick closes instead of sending another")

		time.Sleep(time.Second) // a healthy connection resets the backoff to [0, 1s)
		synctest.Wait()
		require.Equal(t, 2, band.connCount())
		assert.True(t, c.Connected())
		assert.Equal(t, 2, rec.connectedCount())
		assert.Equal(t, []string{control}, band.conn(1).joinedTopics())

		time.Sleep(time.Minute) // the second connection answers its heartbeats
		synctest.Wait()
		assert.Equal(t, 2, band.connCount())
		run.stop(t)
	})
}

func TestUnansweredJoinClosesTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.silentJoin[room1] = true
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.HeartbeatInterval = 10 * time.Second
		c := phoenix.New(cfg)
		c.Join(control, rec.handler(control))
		c.Join(room1, rec.handler(room1))
		run := start(t, c)

		time.Sleep(20*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, rec.disconnectErrs())
		assert.Zero(t, rec.connectedCount(), "OnConnected waits for every join")

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		errs := rec.disconnectErrs()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], phoenix.ErrJoinTimeout)
		assert.ErrorContains(t, errs[0], room1)
		run.stop(t)
	})
}

func TestHeartbeatReplyWithErrorStatusStillCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.silentHeartbeat[0] = true
		rec := newRecorder()
		cfg := rec.config(band)
		cfg.HeartbeatInterval = 10 * time.Second
		c := phoenix.New(cfg)
		run := start(t, c)
		synctest.Wait()
		assert.Equal(t, 1, rec.connectedCount(), "with no topics OnConnected fires at once")
		conn := band.conn(0)
		for i := range 5 {
			time.Sleep(10 * time.Second)
			synctest.Wait()
			beats := conn.framesOf(phoenix.EventHeartbeat)
			require.Len(t, beats, i+1)
			conn.reply(t.Context(), beats[i].frame, "error", json.RawMessage(`{"reason":"whatever"}`))
		}
		synctest.Wait()
		assert.Empty(t, rec.disconnectErrs())
		assert.Equal(t, 1, band.connCount())
		run.stop(t)
	})
}
