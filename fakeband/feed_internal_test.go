package fakeband

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A subscriber that does not keep up is dropped, never waited for: the
// publisher goes on at once, and the subscribers that keep up keep their
// stream.
func TestASlowFeedSubscriberIsDroppedNotWaitedFor(t *testing.T) {
	f := feed{on: true, subs: map[*subscriber]struct{}{}}
	slow := &subscriber{ch: make(chan FeedEvent, feedBuffer), lagged: make(chan struct{})}
	fast := &subscriber{ch: make(chan FeedEvent, feedBuffer), lagged: make(chan struct{})}
	f.subs[slow], f.subs[fast] = struct{}{}, struct{}{}
	for i := range feedBuffer + 10 {
		f.publishLocked(FeedEvent{Kind: EventPost, Seq: i})
		<-fast.ch
	}
	select {
	case <-slow.lagged:
	default:
		t.Fatal("the slow subscriber was not told it lagged")
	}
	assert.NotContains(t, f.subs, slow, "the slow subscriber was dropped")
	assert.Contains(t, f.subs, fast, "the one that keeps up keeps its stream")
	assert.Len(t, slow.ch, feedBuffer, "the slow one got what fit, no more")
}

// blockingWriter is a ResponseWriter whose writes after the first wait
// until release is closed, as a client that stopped reading makes them.
type blockingWriter struct {
	*httptest.ResponseRecorder
	mu      sync.Mutex
	writes  int
	release chan struct{}
	hello   chan struct{} // closed after the first write
	blocked chan struct{} // closed when a write starts waiting
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	n := w.writes
	w.mu.Unlock()
	if n == 1 {
		defer close(w.hello)
	} else {
		w.once.Do(func() { close(w.blocked) })
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseRecorder.Write(p)
}

func (w *blockingWriter) body() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Body.String()
}

// A stream whose client stopped reading falls behind while the Band goes
// on; when the client reads again it gets a reset, telling it to read the
// snapshot again, and the stream ends.
func TestALaggingFeedStreamEndsWithAReset(t *testing.T) {
	b := New(Options{Seed: 1, Admin: true})
	defer b.Close()
	alice, bot := b.AddHuman("Alice"), b.AddAgent("Bot")
	room := b.AddRoom("general", alice, bot.ID)

	w := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), release: make(chan struct{}), hello: make(chan struct{}), blocked: make(chan struct{})}
	r := httptest.NewRequest(http.MethodGet, "http://"+Host+AdminPrefix+"/feed", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.serveFeed(w, r)
	}()
	<-w.hello // subscribed
	_, err := b.Say(room.ID, alice.ID, "first", bot.ID)
	require.NoError(t, err)
	<-w.blocked // the stream is stuck writing the first change
	for i := range feedBuffer + 1 {
		_, err := b.Say(room.ID, alice.ID, "more "+strings.Repeat("x", i%5), bot.ID)
		require.NoError(t, err, "the Band does not wait for the feed")
	}
	close(w.release)
	<-done
	out := w.body()
	assert.True(t, strings.HasPrefix(out, "retry: 1000\nevent: hello\n"), "%.80s", out)
	assert.True(t, strings.HasSuffix(out, "event: reset\ndata: {}\n\n"), "ends with a reset: %q", out[max(0, len(out)-80):])
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	b.mu.Lock()
	assert.Empty(t, b.feed.subs, "the stream is no longer subscribed")
	b.mu.Unlock()
	assert.Positive(t, bytes.Count([]byte(out), []byte("\nid: ")), "it streamed changes before it fell behind")
}
