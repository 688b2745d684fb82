package phoenix_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/memnet"
	"github.com/band-once/bandonce/internal/phoenix"
)

// fakeBand is a minimal Phoenix V2 socket endpoint: it refuses upgrades
// on request, answers joins, leaves and heartbeats, records everything it
// receives, and lets a test push frames or drop connections.
type fakeBand struct {
	t  testing.TB
	mu sync.Mutex

	refusals []refusal // answered in order to the next upgrade attempts
	upgrades []upgrade // every upgrade attempt, refused or not
	conns    []*fakeConn

	refuseJoin      map[string]json.RawMessage // topic → error response
	silentJoin      map[string]bool            // topic → never answer its joins
	silentHeartbeat map[int]bool               // connection index → never answer heartbeats
	pushOnJoin      map[string]string          // topic → event pushed right after the ok reply
}

type refusal struct {
	status int
	header http.Header
	body   string
}

type upgrade struct {
	at     time.Time
	header http.Header
	query  map[string]string
}

// fakeConn is one accepted connection.
type fakeConn struct {
	band  *fakeBand
	index int
	ws    *websocket.Conn
	done  chan struct{}

	mu       sync.Mutex
	received []received
	joinRefs map[string]string // topic → ref of its latest ok join
}

type received struct {
	at    time.Time
	frame phoenix.Frame
}

func newFakeBand(t testing.TB) *fakeBand {
	return &fakeBand{
		t:               t,
		refuseJoin:      map[string]json.RawMessage{},
		silentJoin:      map[string]bool{},
		silentHeartbeat: map[int]bool{},
		pushOnJoin:      map[string]string{},
	}
}

func (b *fakeBand) client() *http.Client { return memnet.Client(b) }

func (b *fakeBand) refuse(status int, header http.Header, body string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refusals = append(b.refusals, refusal{status, header, body})
}

func (b *fakeBand) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	query := map[string]string{}
	for k := range r.URL.Query() {
		query[k] = r.URL.Query().Get(k)
	}
	b.mu.Lock()
	b.upgrades = append(b.upgrades, upgrade{at: time.Now(), header: r.Header.Clone(), query: query})
	var ref *refusal
	if len(b.refusals) > 0 {
		ref = &b.refusals[0]
		b.refusals = b.refusals[1:]
	}
	b.mu.Unlock()
	if ref != nil {
		for k, vs := range ref.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(ref.status)
		_, _ = w.Write([]byte(ref.body))
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(-1)
	b.mu.Lock()
	c := &fakeConn{band: b, index: len(b.conns), ws: ws, done: make(chan struct{}), joinRefs: map[string]string{}}
	b.conns = append(b.conns, c)
	b.mu.Unlock()
	defer close(c.done)
	defer ws.CloseNow()
	c.serve(context.WithoutCancel(r.Context()))
}

func (c *fakeConn) serve(ctx context.Context) {
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return
		}
		f, err := phoenix.Decode(data)
		if err != nil {
			c.band.t.Errorf("fake band: client sent a bad frame %q: %v", data, err)
			return
		}
		c.mu.Lock()
		c.received = append(c.received, received{at: time.Now(), frame: f})
		c.mu.Unlock()
		c.answer(ctx, f)
	}
}

func (c *fakeConn) answer(ctx context.Context, f phoenix.Frame) {
	b := c.band
	b.mu.Lock()
	silentBeat := b.silentHeartbeat[c.index]
	refusedWith, refused := b.refuseJoin[f.Topic]
	silentJoin := b.silentJoin[f.Topic]
	pushEvent := b.pushOnJoin[f.Topic]
	b.mu.Unlock()
	switch f.Event {
	case phoenix.EventHeartbeat:
		if !silentBeat {
			c.reply(ctx, f, "ok", nil)
		}
	case phoenix.EventJoin:
		switch {
		case silentJoin:
		case refused:
			c.reply(ctx, f, "error", refusedWith)
		default:
			c.mu.Lock()
			c.joinRefs[f.Topic] = f.Ref
			c.mu.Unlock()
			c.reply(ctx, f, "ok", nil)
			if pushEvent != "" {
				c.write(ctx, phoenix.Frame{JoinRef: f.Ref, Topic: f.Topic, Event: pushEvent, Payload: json.RawMessage(`{"on":"join"}`)})
			}
		}
	case phoenix.EventLeave:
		c.reply(ctx, f, "ok", nil)
		c.write(ctx, phoenix.Frame{JoinRef: f.JoinRef, Topic: f.Topic, Event: phoenix.EventClose})
		c.mu.Lock()
		delete(c.joinRefs, f.Topic)
		c.mu.Unlock()
	}
}

func (c *fakeConn) reply(ctx context.Context, to phoenix.Frame, status string, response json.RawMessage) {
	if response == nil {
		response = json.RawMessage(`{}`)
	}
	payload, err := json.Marshal(phoenix.Reply{Status: status, Response: response})
	require.NoError(c.band.t, err)
	c.write(ctx, phoenix.Frame{JoinRef: to.JoinRef, Ref: to.Ref, Topic: to.Topic, Event: phoenix.EventReply, Payload: payload})
}

func (c *fakeConn) write(ctx context.Context, f phoenix.Frame) {
	data, err := phoenix.Encode(f)
	require.NoError(c.band.t, err)
	c.writeRaw(ctx, websocket.MessageText, data)
}

// writeRaw ignores failures: the client may have gone, which tests check
// by other means.
func (c *fakeConn) writeRaw(ctx context.Context, typ websocket.MessageType, data []byte) {
	_ = c.ws.Write(ctx, typ, data)
}

// push sends event on topic as the server's channel would, tagged with
// the topic's current join ref.
func (c *fakeConn) push(topic, event, payload string) {
	c.mu.Lock()
	joinRef := c.joinRefs[topic]
	c.mu.Unlock()
	c.write(context.Background(), phoenix.Frame{JoinRef: joinRef, Topic: topic, Event: event, Payload: json.RawMessage(payload)})
}

// drop closes the connection without a close handshake, like a network
// failure would.
func (c *fakeConn) drop() { _ = c.ws.CloseNow() }

// framesOf returns the frames received with the given event, in order.
func (c *fakeConn) framesOf(event string) []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []received
	for _, r := range c.received {
		if r.frame.Event == event {
			out = append(out, r)
		}
	}
	return out
}

func (c *fakeConn) joinedTopics() []string {
	var topics []string
	for _, r := range c.framesOf(phoenix.EventJoin) {
		topics = append(topics, r.frame.Topic)
	}
	return topics
}

func (b *fakeBand) conn(i int) *fakeConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Greater(b.t, len(b.conns), i, "connection %d was never accepted", i)
	return b.conns[i]
}

func (b *fakeBand) connCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *fakeBand) upgradeLog() []upgrade {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]upgrade(nil), b.upgrades...)
}

// refNumber parses a client ref, which must be a decimal counter.
func refNumber(t testing.TB, ref string) int {
	n, err := strconv.Atoi(ref)
	require.NoError(t, err, "ref %q", ref)
	return n
}
