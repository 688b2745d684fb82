package bandonce_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// world is a fake Band with one agent, one human and some rooms, the
// ground every shell test stands on.
type world struct {
	t     *testing.T
	band  *fakeband.Band
	agent fakeband.Agent
	human fakeband.Human
	rooms []fakeband.Room
}

func newWorld(t *testing.T, rooms int) *world {
	t.Helper()
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { _ = b.Close() })
	w := &world{t: t, band: b, agent: b.AddAgent("echo"), human: b.AddHuman("ada")}
	for i := range rooms {
		w.rooms = append(w.rooms, b.AddRoom(fmt.Sprint("room-", i), w.human, w.agent.ID))
	}
	return w
}

// say posts a human message that mentions the agent and returns its id.
func (w *world) say(room fakeband.Room, text string) string {
	w.t.Helper()
	id, err := w.band.Say(room.ID, w.human.ID, text, w.agent.ID)
	require.NoError(w.t, err)
	return id
}

// config is a Config for the world's agent over the in-memory transport.
func (w *world) config(h bandonce.Handler) bandonce.Config {
	return bandonce.Config{
		APIKey:        w.agent.Key,
		BaseURL:       w.band.BaseURL(),
		SocketURL:     w.band.SocketURL(),
		HTTPClient:    w.band.HTTPClient(),
		Handler:       h,
		DisableSocket: true,
		Retry:         bandonce.RetryPolicy{Seed: 7},
		SettleWindow:  testSettleWindow,
	}
}

// testSettleWindow is the tests' Config.SettleWindow. Unless a test holds
// a request at the fake, the fake applies a request when it is served,
// never later, so a short window keeps the tests' minutes of virtual time
// ample.
const testSettleWindow = 5 * time.Second

// start runs a shell until the returned stop is called; stop returns
// Run's error.
func (w *world) start(cfg bandonce.Config) (stop func() error) {
	w.t.Helper()
	s, err := bandonce.New(cfg)
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// replies returns the agent's posts in a room, in order.
func (w *world) replies(room fakeband.Room) []fakeband.Post {
	var out []fakeband.Post
	for _, p := range w.band.Posts(room.ID) {
		if p.SenderID == w.agent.ID {
			out = append(out, p)
		}
	}
	return out
}

// humanMessages returns the ids of the human's posts in a room, in order.
func (w *world) humanMessages(room fakeband.Room) []string {
	var out []string
	for _, p := range w.band.Posts(room.ID) {
		if p.SenderID == w.human.ID {
			out = append(out, p.ID)
		}
	}
	return out
}

// repliesTo counts the agent's posts carrying key's marker in a room.
func (w *world) repliesTo(room fakeband.Room, key string) int {
	n := 0
	for _, p := range w.replies(room) {
		if strings.HasSuffix(p.Content, "[dedup_key:"+key+"]") {
			n++
		}
	}
	return n
}

// runFor lets virtual time run for d: long enough for every room to drain.
func runFor(d time.Duration) {
	time.Sleep(d)
}

// echo replies "echo: <body>" to the sender with the message's default key.
func echo(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
