package bandonce_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// socketConfig is the world's config with the Phoenix socket on, so control
// signals reach the shell.
func (w *world) socketConfig(h bandonce.Handler) bandonce.Config {
	cfg := w.config(h)
	cfg.DisableSocket = false
	return cfg
}

// slowHandler echoes after d unless its context ends first; it records the
// cause it saw.
type slowHandler struct {
	mu     sync.Mutex
	d      time.Duration
	causes []error
	calls  int
}

func (s *slowHandler) handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	s.mu.Lock()
	s.calls++
	d := s.d
	s.mu.Unlock()
	select {
	case <-time.After(d):
		return echo(ctx, m)
	case <-ctx.Done():
		s.mu.Lock()
		s.causes = append(s.causes, context.Cause(ctx))
		s.mu.Unlock()
		return &bandonce.Reply{Content: "too late", Mentions: []string{m.SenderID}}, nil
	}
}

func (s *slowHandler) setDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = d
}

func (s *slowHandler) seen() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.causes...)
}

func TestInterruptDuringASlowHandlerPostsNothingAndConsumesTheMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		first := w.say(room, "slow one")
		h := &slowHandler{d: time.Minute}
		stop := w.start(w.socketConfig(h.handle))
		time.Sleep(time.Second)
		require.NoError(t, w.band.Interrupt(w.agent.ID, ""))
		time.Sleep(time.Second)
		h.setDelay(0)
		second := w.say(room, "next one")
		settle(10 * time.Second)
		require.NoError(t, stop())

		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrInterrupted)
		assert.Zero(t, w.repliesTo(room, bandonce.DefaultKey(first)), "a reply returned after the interrupt is dropped")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, first))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(second)), "the next message is handled normally")
		for _, mk := range w.band.Marks(w.agent.ID, first) {
			assert.NotEqual(t, "failed", mk.Kind)
		}
	})
}

func TestStopLeavesTheMessageAndPlayReplaysInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		room, other := w.rooms[0], w.rooms[1]
		first := w.say(room, "slow one")
		h := &slowHandler{d: time.Minute}
		cfg := w.socketConfig(h.handle)
		cfg.ResyncInterval = time.Hour // count only what the rooms do on their own
		stop := w.start(cfg)
		time.Sleep(time.Second)
		require.NoError(t, w.band.StopRoom(room.ID))
		time.Sleep(time.Second)
		h.setDelay(0)
		during := []string{w.say(room, "while stopped 1"), w.say(room, "while stopped 2")}
		time.Sleep(5 * time.Second)                            // the pushes' probes: 204 behind the gate
		nextBefore := w.band.Requests()[fakeband.EndpointNext] // before the other room wakes
		elsewhere := w.say(other, "other room")
		settle(10 * time.Minute)

		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrStopped)
		assert.Equal(t, "processing", w.band.Status(w.agent.ID, first), "a stopped message is left for replay")
		assert.Zero(t, len(w.replies(room)), "nothing posted in the stopped room")
		assert.Equal(t, 1, w.repliesTo(other, bandonce.DefaultKey(elsewhere)), "other rooms are unaffected")
		assert.Equal(t, 2, w.band.Requests()[fakeband.EndpointNext]-nextBefore,
			"only the other room's drain (a message, then 204): the stopped room polls nothing but its hourly probe")

		require.NoError(t, w.band.PlayRoom(room.ID))
		settle(10 * time.Second)
		require.NoError(t, stop())
		replies := w.replies(room)
		require.Len(t, replies, 3)
		for i, id := range append([]string{first}, during...) {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			assert.Contains(t, replies[i].Content, "[dedup_key:"+bandonce.DefaultKey(id)+"]", "replayed in order")
		}
	})
}

func TestSupersedeStopsEveryRoomAndRunReturnsErrSuperseded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "slow")
		h := &slowHandler{d: time.Hour}
		s, err := bandonce.New(w.socketConfig(h.handle))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		time.Sleep(time.Second)
		w.band.Supersede(w.agent.ID)
		err = <-done
		assert.True(t, errors.Is(err, bandonce.ErrSuperseded), "%v", err)
		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrSuperseded)
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointSocket], "never reconnects")
	})
}

// A claim answered 503 is retried, and every retry asks the room's gate
// again: once a stop reached the room between two tries, the retry is not
// sent, the message stays unclaimed for replay, and play answers it once.
func TestAClaimRetriedAfterAStopReachedTheRoomIsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hello")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Kind: fakeband.FailBefore, Status: http.StatusServiceUnavailable})
		cfg := w.socketConfig(echo)
		var stopped atomic.Bool
		cfg.Hooks.Request = func(_ context.Context, r bandonce.Request) {
			if strings.HasSuffix(r.Endpoint, "/processing") && r.Status == http.StatusServiceUnavailable && !stopped.Swap(true) {
				// Between the first try and its retry, the owner stops
				// the agent in the room; the push reaches it during the
				// retry's backoff.
				assert.NoError(t, w.band.StopRoom(room.ID))
			}
		}
		stop := w.start(cfg)
		time.Sleep(time.Minute)
		require.True(t, stopped.Load(), "the claim was answered 503")
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointProcessing], "the retry of the claim was not sent after the stop")
		assert.NotEqual(t, "processing", w.band.Status(w.agent.ID, id), "never claimed while stopped")
		assert.Zero(t, len(w.replies(room)))

		require.NoError(t, w.band.PlayRoom(room.ID))
		settle(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
	})
}
