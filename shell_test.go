package bandonce_test

import (
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func TestEveryMessageOfThreeRoomsGetsExactlyOneReplyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 3)
		for i := range 20 {
			for _, r := range w.rooms {
				w.say(r, fmt.Sprintf("hello %d", i))
			}
		}
		stop := w.start(w.config(echo))
		runFor(30 * time.Second)
		require.NoError(t, stop())

		for _, r := range w.rooms {
			msgs := w.humanMessages(r)
			replies := w.replies(r)
			require.Len(t, msgs, 20)
			require.Len(t, replies, 20, "one reply per message in %s", r.Title)
			for i, id := range msgs {
				assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
				assert.Equal(t, 1, w.repliesTo(r, bandonce.DefaultKey(id)), "message %d", i)
				assert.Contains(t, replies[i].Content, fmt.Sprintf("echo: hello %d", i), "replies follow /next order")
			}
		}
	})
}

// Origin: band-once 0.1's defect 11 (band-once-python.md).
// band-once 0.1 wrote a run log under runlogs/ by default.
func TestShellWritesNoFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hi")
		stop := w.start(w.config(echo))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		require.Len(t, w.replies(w.rooms[0]), 1)
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
