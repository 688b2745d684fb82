package phoenix_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/internal/phoenix"
	"github.com/band-once/bandonce/internal/safebuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects what the client reports through its callbacks.
type recorder struct {
	mu          sync.Mutex
	connected   int
	disconnects []error
	joinErrors  []joinError
	pushes      map[string][]push
	logs        safebuf.Buffer
}

type joinError struct {
	topic    string
	response string
}

type push struct {
	event   string
	payload string
}

func newRecorder() *recorder { return &recorder{pushes: map[string][]push{}} }

// config points a client at b with test-friendly timings and hooks.
func (r *recorder) config(b *fakeBand) phoenix.Config {
	return phoenix.Config{
		URL:               "ws://band.invalid/api/v1/socket/websocket",
		APIKey:            "band_a_secret",
		AgentID:           "agent-1",
		HTTPClient:        b.client(),
		Logger:            slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HeartbeatInterval: 30 * time.Second,
		ReconnectBase:     time.Second,
		ReconnectMax:      time.Minute,
		Seed:              42,
		OnConnected: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.connected++
		},
		OnDisconnected: func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.disconnects = append(r.disconnects, err)
		},
		OnJoinError: func(topic string, response json.RawMessage) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.joinErrors = append(r.joinErrors, joinError{topic, string(response)})
		},
	}
}

func (r *recorder) handler(topic string) phoenix.Handler {
	return func(event string, payload json.RawMessage) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.pushes[topic] = append(r.pushes[topic], push{event, string(payload)})
	}
}

func (r *recorder) connectedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.connected
}

func (r *recorder) disconnectErrs() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.disconnects...)
}

func (r *recorder) joinErrs() []joinError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]joinError(nil), r.joinErrors...)
}

func (r *recorder) pushesOn(topic string) []push {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]push(nil), r.pushes[topic]...)
}

// running is a Run call in progress.
type running struct {
	cancel context.CancelCauseFunc
	done   chan error
}

func start(t *testing.T, c *phoenix.Client) *running {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	return r
}

var errTestOver = errors.New("test over")

// stop cancels Run and checks that it returns the cause without needing
// any (virtual) time to pass.
func (r *running) stop(t *testing.T) {
	t.Helper()
	began := time.Now()
	r.cancel(errTestOver)
	err := <-r.done
	require.ErrorIs(t, err, errTestOver)
	require.Equal(t, began, time.Now(), "Run took virtual time to stop")
}
