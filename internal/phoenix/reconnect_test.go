package phoenix_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

func TestServerDropReconnectsAndRejoinsEveryTopicInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		topics := []string{control, rooms, room1, "room_participants:r1"}
		for _, topic := range topics {
			c.Join(topic, rec.handler(topic))
		}
		run := start(t, c)
		synctest.Wait()

		lastRef := 0
		for i := range 5 {
			conn := band.conn(i)
			assert.Equal(t, topics, conn.joinedTopics(), "connection %d", i)
			for _, j := range conn.framesOf(phoenix.EventJoin) {
				ref := refNumber(t, j.frame.Ref)
				assert.Greater(t, ref, lastRef, "refs keep increasing across connections")
				lastRef = ref
			}
			assert.Equal(t, i+1, rec.connectedCount())

			time.Sleep(healthyUp) // healthy: up a heartbeat interval
			synctest.Wait()
			droppedAt := time.Now()
			conn.drop()
			synctest.Wait()
			assert.False(t, c.Connected())
			time.Sleep(time.Second)
			synctest.Wait()
			ups := band.upgradeLog()
			require.Len(t, ups, i+2)
			assert.Less(t, ups[i+1].at.Sub(droppedAt), time.Second, "after a healthy connection the backoff starts over")
		}
		errs := rec.disconnectErrs()
		assert.Len(t, errs, 5)
		assert.True(t, allConnLost(errs), "%v", errs)
		run.stop(t)
	})
}

// reconnectGaps drops n connections in a row and returns, for each, how
// long the client waited before its next upgrade.
func reconnectGaps(t *testing.T, band *fakeBand, n int, up time.Duration) []time.Duration {
	var gaps []time.Duration
	for i := range n {
		synctest.Wait()
		time.Sleep(up)
		synctest.Wait()
		droppedAt := time.Now()
		band.conn(i).drop()
		for band.connCount() < i+2 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		ups := band.upgradeLog()
		gaps = append(gaps, ups[len(ups)-1].at.Sub(droppedAt))
	}
	return gaps
}

// healthyUp is how long a connection stays up, its joins all answered,
// to count as healthy: the harness's heartbeat interval.
const healthyUp = 30 * time.Second

func TestBackoffResetsOnlyAfterAHealthyConnection(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			rec := newRecorder()
			c := phoenix.New(rec.config(band))
			c.Join(control, rec.handler(control))
			run := start(t, c)
			for i, gap := range reconnectGaps(t, band, 8, healthyUp) {
				assert.Less(t, gap, time.Second, "drop %d", i)
			}
			run.stop(t)
		})
	})
	growing := func(t *testing.T, gaps []time.Duration) {
		t.Helper()
		longest := time.Duration(0)
		for i, gap := range gaps {
			window := time.Second << i
			assert.Less(t, gap, min(window, time.Minute), "drop %d waits within its doubling window", i)
			longest = max(longest, gap)
		}
		assert.Greater(t, longest, time.Second, "the window grew: %v", gaps)
	}
	t.Run("a join refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			band.refuseJoin[room1] = json.RawMessage(`{}`)
			rec := newRecorder()
			c := phoenix.New(rec.config(band))
			c.Join(control, rec.handler(control))
			c.Join(room1, rec.handler(room1))
			run := start(t, c)
			growing(t, reconnectGaps(t, band, 8, healthyUp))
			run.stop(t)
		})
	})
	// A server that drops every connection soon after its joins (a frame
	// too large each time, a crash loop) is not reconnected to twice a
	// second for ever.
	t.Run("dropped soon after its joins", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(t)
			rec := newRecorder()
			c := phoenix.New(rec.config(band))
			c.Join(control, rec.handler(control))
			run := start(t, c)
			growing(t, reconnectGaps(t, band, 8, healthyUp/2))
			run.stop(t)
		})
	})
}

// clientGoroutines counts live goroutines running the client's own code,
// and the fake server's connection loops.
func clientGoroutines() (client, server int) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "bandonce/internal/phoenix.") {
			client++
		}
		if strings.Contains(g, "phoenix_test.(*fakeConn).serve") {
			server++
		}
	}
	return client, server
}

func TestAThousandDropsLeaveNoGoroutineAndLoseNoPushAfterRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		rec := newRecorder()
		c := phoenix.New(rec.config(band))
		topics := []string{control, rooms, room1}
		for _, topic := range topics {
			c.Join(topic, rec.handler(topic))
		}
		run := start(t, c)
		const drops = 1000
		for i := range drops {
			synctest.Wait()
			require.Equal(t, i+1, rec.connectedCount(), "connection %d", i)
			conn := band.conn(i)
			require.Equal(t, topics, conn.joinedTopics(), "connection %d", i)
			// Run's goroutine, the reader and the writer; one server loop.
			client, server := clientGoroutines()
			require.Equal(t, 3, client, "client goroutines on connection %d", i)
			require.Equal(t, 1, server, "server loops on connection %d", i)

			for _, topic := range topics {
				conn.push(topic, "n", fmt.Sprintf(`{"n":%d}`, i))
			}
			synctest.Wait()
			for _, topic := range topics {
				got := rec.pushesOn(topic)
				require.Len(t, got, i+1, "%s on connection %d", topic, i)
				require.Equal(t, push{"n", fmt.Sprintf(`{"n":%d}`, i)}, got[i])
			}
			time.Sleep(healthyUp)
			synctest.Wait()
			conn.drop()
			time.Sleep(time.Second)
		}
		synctest.Wait()
		run.stop(t)
		synctest.Wait()
		client, server := clientGoroutines()
		assert.Zero(t, client, "client goroutines after Run returned")
		assert.Zero(t, server)
		assert.Len(t, rec.disconnectErrs(), drops+1)
	})
}

// A channel the server ends at once after every ok join is rejoined on a
// growing backoff, not at the base window for ever; one that stayed
// joined a heartbeat interval starts over.
func TestAChannelThatCrashesAfterEveryJoinBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(t)
		band.pushOnJoin[room1] = phoenix.EventError
		rec := newRecorder()
		c := phoenix.New(rec.config(band)) // backoff from 1 s up to 1 min
		c.Join(room1, rec.handler(room1))
		run := start(t, c)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		joins := len(band.conn(0).framesOf(phoenix.EventJoin))
		// At the base window a join every second or so: hundreds. Doubling
		// to the minute's cap: a dozen or so in ten minutes.
		assert.Less(t, joins, 30, "joins in 10 minutes, on one connection")
		assert.Equal(t, 1, band.connCount())
		run.stop(t)
	})
}
