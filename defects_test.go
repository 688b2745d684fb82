package bandonce_test

// One test per defect of band-once 0.1 (band-once-python.md), each failing
// on that behaviour and passing here.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// postThenCrash runs a shell until the reply of the room's last message is
// posted while its processed mark keeps failing, then throws the shell
// away, as a crash between the post and the ack would.
func postThenCrash(t *testing.T, w *world, h bandonce.Handler, room fakeband.Room, msgID string) {
	t.Helper()
	w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 1000, Kind: fakeband.FailBefore, Status: 503})
	stop := w.start(w.config(h))
	settle(20 * time.Second)
	require.NoError(t, stop())
	w.band.ClearFaults()
	require.Equal(t, "processing", w.band.Status(w.agent.ID, msgID), "the crash left the message unacked")
}

// Defect 1: the guard read one page of /context, so a reply on a later
// page was not seen and a redelivery double-posted.
func TestRedeliveryAfterThreePagesOfContextDoesNotDoublePost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		for i := range 230 {
			w.say(room, fmt.Sprint("warm-up ", i))
		}
		stop := w.start(w.config(echo))
		settle(time.Minute)
		require.NoError(t, stop())
		require.Len(t, w.replies(room), 230, "more than two pages of the agent's own posts")

		last := w.say(room, "the one that crashes")
		postThenCrash(t, w, echo, room, last)
		require.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(last)))

		stop = w.start(w.config(echo)) // a fresh shell knows nothing
		settle(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(last)), "no double post")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, last))
	})
}

// Defect 2: the guard matched substrings of the page's JSON, so a key
// quoted by a human, or a longer key containing this one, dropped a reply
// that was never posted.
func TestQuotedOrLongerKeysDoNotSuppressAReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		keyed := func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return &bandonce.Reply{Content: "done", Mentions: []string{m.SenderID}, DedupKey: m.Body()}, nil
		}
		w.say(room, "work:k10")
		w.say(room, "quoting you:\n[dedup_key:work:k1]")
		target := w.say(room, "work:k1")
		stop := w.start(w.config(keyed))
		settle(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, "work:k10"))
		assert.Equal(t, 1, w.repliesTo(room, "work:k1"), "the reply for work:k1 was posted")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, target))
	})
}

// Defect 3: the HTTP retry re-sent the reply blind after a lost response.
func TestPostAppliedButResponseLostGivesExactlyOneReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
		stop := w.start(w.config(echo))
		settle(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.band.FaultsFired()["post/lose_response"], "the fault really fired")
	})
}

// Defect 4: a reply without a key got a random one and was never guarded.
func TestReplyWithoutKeyIsStillGuarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		postThenCrash(t, w, echo, room, id)
		stop := w.start(w.config(echo))
		settle(20 * time.Second)
		require.NoError(t, stop())
		assert.Len(t, w.replies(room), 1)
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
	})
}

// Defect 5: a failed message stalled the room, since Band re-serves it at
// the head of /next.
func TestHandlerFailingPastMaxAttemptsDoesNotStallTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		poison := w.say(room, "poison")
		after := []string{w.say(room, "next 1"), w.say(room, "next 2")}
		var deadLetters atomic.Int32
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if m.Body() == "poison" {
				return nil, fmt.Errorf("cannot digest %q", m.Body())
			}
			return echo(ctx, m)
		})
		cfg.MaxAttempts = 3
		cfg.Hooks.DeadLetter = func(bandonce.Outcome) { deadLetters.Add(1) }
		stop := w.start(cfg)
		settle(time.Minute)
		require.NoError(t, stop())

		for _, id := range after {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		}
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, poison), "dead-lettered messages are consumed")
		assert.Zero(t, w.repliesTo(room, bandonce.DefaultKey(poison)))
		var failed []string
		for _, mk := range w.band.Marks(w.agent.ID, poison) {
			if mk.Kind == "failed" {
				failed = append(failed, mk.Error)
			}
		}
		require.Len(t, failed, 3, "three failures, the last with the dead-letter reason")
		assert.Contains(t, failed[0], "cannot digest")
		assert.Contains(t, failed[2], "dead-lettered after 3 failure(s)")
		assert.EqualValues(t, 1, deadLetters.Load())
	})
}

// Defect 6: a failed ack after the post was turned into a failed mark.
func TestProcessedFailingAfterThePostRetriesOnlyTheAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		var calls atomic.Int32
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			calls.Add(1)
			return echo(ctx, m)
		}
		// Enough 503s to exhaust one call's retries twice over.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 12, Kind: fakeband.FailBefore, Status: 503})
		stop := w.start(w.config(h))
		settle(2 * time.Minute)
		require.NoError(t, stop())
		assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		for _, mk := range w.band.Marks(w.agent.ID, id) {
			assert.NotEqual(t, "failed", mk.Kind, "a message whose reply was posted is never marked failed")
		}
	})
}

// Defect 7: context was always fetched, twice, even for a handler that
// never looks at it. A first delivery with the default key costs four
// round trips: next, processing, post, processed.
func TestHandlerThatIgnoresContextCostsNoContextRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		for i := range 5 {
			w.say(w.rooms[0], fmt.Sprint("m", i))
		}
		cfg := w.config(echo)
		cfg.PollInterval = time.Hour // count only the drain's own requests
		stop := w.start(cfg)
		settle(10 * time.Second)
		require.NoError(t, stop())
		req := w.band.Requests()
		assert.Zero(t, req[fakeband.EndpointContext])
		assert.Equal(t, 5, req[fakeband.EndpointPost])
		assert.Equal(t, 5, req[fakeband.EndpointProcessing])
		assert.Equal(t, 5, req[fakeband.EndpointProcessed])
		assert.Equal(t, 6, req[fakeband.EndpointNext], "five messages and the 204 that ends the drain")
	})
}

// RoomContext loads lazily: only a handler that asks pays for the read.
func TestRoomContextIsLoadedOnlyWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "first")
		w.say(w.rooms[0], "second")
		var seen []int
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			items, err := m.RoomContext(ctx)
			if err != nil {
				return nil, err
			}
			again, _ := m.RoomContext(ctx)
			if len(again) != len(items) {
				return nil, bandonce.Permanent(fmt.Errorf("context changed between calls"))
			}
			seen = append(seen, len(items))
			return echo(ctx, m)
		}
		stop := w.start(w.config(h))
		settle(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, []int{2, 3}, seen, "both mentions, then also the first reply")
		assert.Equal(t, 2, w.band.Requests()[fakeband.EndpointContext], "one read per message, cached within it")
	})
}

// Defect 11: band-once 0.1 wrote a run log under runlogs/ by default.
func TestShellWritesNoFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hi")
		stop := w.start(w.config(echo))
		settle(10 * time.Second)
		require.NoError(t, stop())
		require.Len(t, w.replies(w.rooms[0]), 1)
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
