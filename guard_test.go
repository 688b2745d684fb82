package bandonce_test

// What the dedup guard does: a reply is posted at most once per key and
// room, whatever page of /context it is on, whoever quotes its key, and
// however its answer was lost.

import (
	"context"
	"fmt"
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
	runFor(20 * time.Second)
	require.NoError(t, stop())
	w.band.ClearFaults()
	require.Equal(t, "processing", w.band.Status(w.agent.ID, msgID), "the crash left the message unacked")
}

// Origin: band-once 0.1's defect 1 (band-once-python.md).
// The guard read one page of /context, so a reply on a later page was not
// seen and a redelivery double-posted.
func TestRedeliveryAfterThreePagesOfContextDoesNotDoublePost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		for i := range 230 {
			w.say(room, fmt.Sprint("warm-up ", i))
		}
		stop := w.start(w.config(echo))
		runFor(time.Minute)
		require.NoError(t, stop())
		require.Len(t, w.replies(room), 230, "more than two pages of the agent's own posts")

		last := w.say(room, "the one that crashes")
		postThenCrash(t, w, echo, room, last)
		require.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(last)))

		stop = w.start(w.config(echo)) // a fresh shell knows nothing
		runFor(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(last)), "no double post")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, last))
	})
}

// Origin: band-once 0.1's defect 2 (band-once-python.md).
// The guard matched substrings of the page's JSON, so a key quoted by a
// human, or a longer key containing this one, dropped a reply that was never
// posted.
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
		runFor(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, "work:k10"))
		assert.Equal(t, 1, w.repliesTo(room, "work:k1"), "the reply for work:k1 was posted")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, target))
	})
}

// Origin: band-once 0.1's defect 3 (band-once-python.md).
// The HTTP retry re-sent the reply blind after a lost response.
func TestPostAppliedButResponseLostGivesExactlyOneReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
		stop := w.start(w.config(echo))
		runFor(20 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.band.FaultsFired()["post/lose_response"], "the fault really fired")
	})
}

// Origin: band-once 0.1's defect 4 (band-once-python.md).
// A reply without a key got a random one and was never guarded.
func TestReplyWithoutKeyIsStillGuarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		postThenCrash(t, w, echo, room, id)
		stop := w.start(w.config(echo))
		runFor(20 * time.Second)
		require.NoError(t, stop())
		assert.Len(t, w.replies(room), 1)
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
	})
}
