package fakeband_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/phoenix"
)

// socketClient is a bare Phoenix client for driving the fake's socket:
// it queues every frame it receives so a test can take them one by one,
// or look at what is pending once the bubble is idle.
type socketClient struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan phoenix.Frame // closed when the connection ends
	err    error              // why it ended; read it after frames is closed
	ref    int
}

func dialSocket(t *testing.T, b *fakeband.Band, key string) *socketClient {
	t.Helper()
	c, resp, err := tryDial(b.HTTPClient(), b.SocketURL(), http.Header{"X-Api-Key": {key}})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return startClient(t, c)
}

func tryDial(hc *http.Client, url string, h http.Header) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
}

func startClient(t *testing.T, ws *websocket.Conn) *socketClient {
	c := &socketClient{t: t, ws: ws, frames: make(chan phoenix.Frame, 1000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.frames)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.err = err
				return
			}
			f, err := phoenix.Decode(data)
			if err != nil {
				t.Errorf("undecodable frame %q: %v", data, err)
				return
			}
			c.frames <- f
		}
	}()
	t.Cleanup(func() {
		_ = ws.CloseNow()
		<-done
	})
	return c
}

// send writes a frame and returns its ref.
func (c *socketClient) send(joinRef, topic, event string, payload any) string {
	c.t.Helper()
	c.ref++
	ref := strconv.Itoa(c.ref)
	raw, err := json.Marshal(payload)
	require.NoError(c.t, err)
	data, err := phoenix.Encode(phoenix.Frame{JoinRef: joinRef, Ref: ref, Topic: topic, Event: event, Payload: raw})
	require.NoError(c.t, err)
	require.NoError(c.t, c.ws.Write(context.Background(), websocket.MessageText, data))
	return ref
}

// next takes the next frame; it fails the test if none comes within a
// (virtual, under synctest) minute.
func (c *socketClient) next() phoenix.Frame {
	c.t.Helper()
	select {
	case f, ok := <-c.frames:
		require.True(c.t, ok, "connection closed")
		return f
	case <-time.After(time.Minute):
		c.t.Fatal("no frame arrived")
	}
	return phoenix.Frame{}
}

// join joins topic and returns the reply frame and its decoded payload.
func (c *socketClient) join(topic string) (phoenix.Frame, phoenix.Reply) {
	c.t.Helper()
	c.ref++
	ref := strconv.Itoa(c.ref)
	c.ref--
	c.send(ref, topic, phoenix.EventJoin, map[string]any{})
	f := c.next()
	require.Equal(c.t, phoenix.EventReply, f.Event)
	require.Equal(c.t, ref, f.Ref)
	var r phoenix.Reply
	require.NoError(c.t, json.Unmarshal(f.Payload, &r))
	return f, r
}

func (c *socketClient) mustJoin(topic string) string {
	c.t.Helper()
	f, r := c.join(topic)
	require.Equal(c.t, "ok", r.Status, "join %s: %s", topic, r.Response)
	return f.JoinRef
}

// pending returns what has arrived and not been taken, and whether the
// connection has ended. Call it after synctest.Wait.
func (c *socketClient) pending() (frames []phoenix.Frame, closed bool) {
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return frames, true
			}
			frames = append(frames, f)
		default:
			return frames, false
		}
	}
}

func (c *socketClient) requireQuiet() {
	c.t.Helper()
	synctest.Wait()
	frames, closed := c.pending()
	require.Empty(c.t, frames)
	require.False(c.t, closed)
}

// payload decodes a frame's payload into a generic map.
func payload(t *testing.T, f phoenix.Frame) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(f.Payload, &m))
	return m
}
