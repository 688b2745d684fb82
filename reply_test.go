package bandonce_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

func TestAReplyWithoutMentionsMentionsTheSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Send(ctx, bandonce.Reply{Content: "working on it"}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "done"}, nil
		})
		stop := startOnce(w, cfg)
		time.Sleep(time.Minute)
		require.NoError(t, stop())

		posts := w.replies(room)
		require.Len(t, posts, 2, "the sent message and the reply, neither refused")
		for _, p := range posts {
			assert.Equal(t, []string{w.human.ID}, p.Mentions)
		}
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
	})
}

func TestAnOversizeReplyIsRefusedBeforeAnythingIsPosted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "the whole log, please")
		huge := strings.Repeat("log line\n", bandonce.MaxReplyBytes/9+1)
		var sendErr error
		var mu sync.Mutex
		var dead []bandonce.Outcome
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			err := m.Send(ctx, bandonce.Reply{Content: huge})
			mu.Lock()
			sendErr = err
			mu.Unlock()
			return &bandonce.Reply{Content: huge, Mentions: []string{m.SenderID}}, nil
		})
		cfg.Hooks.DeadLetter = func(o bandonce.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, o)
		}
		stop := startOnce(w, cfg)
		time.Sleep(time.Minute)
		require.NoError(t, stop())

		mu.Lock()
		defer mu.Unlock()
		var tooLarge *bandonce.ReplyTooLargeError
		require.ErrorAs(t, sendErr, &tooLarge, "Send refuses it locally")
		assert.Greater(t, tooLarge.Bytes, bandonce.MaxReplyBytes)
		assert.Equal(t, bandonce.MaxReplyBytes, tooLarge.Max)
		assert.Contains(t, sendErr.Error(), "bytes serialized; Band takes at most 1048576")

		assert.Zero(t, w.band.Requests()[fakeband.EndpointPost], "nothing was sent to Band")
		require.Len(t, dead, 1, "the handler's reply is a permanent failure")
		assert.True(t, errors.As(dead[0].Err, &tooLarge))
		var perm *bandonce.PermanentError
		assert.ErrorAs(t, dead[0].Err, &perm)
		events := w.errorEvents(room)
		require.Len(t, events, 1)
		assert.Contains(t, events[0].Content, "my answer was too long to post")
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
	})
}

// A reply whose DedupKey no ledger can store (a NUL byte: PostgreSQL's
// text cannot hold one) is refused before anything is recorded or sent:
// the message is dead-lettered and the room goes on to the next one.
func TestAReplyWithAKeyNoLedgerCanStoreIsDeadLetteredAndTheRoomGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		bad := w.say(room, "first")
		good := w.say(room, "second")
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			key := ""
			if m.ID == bad {
				key = "user-ref:\x00" + m.ID
			}
			return &bandonce.Reply{Content: "echo: " + m.Body(), DedupKey: key}, nil
		})
		stop := w.start(cfg)
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, bad), "dead-lettered: consumed")
		assert.Zero(t, w.repliesTo(room, "user-ref:\x00"+bad))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(good)), "the room went on")
	})
}
