package fakeband

import (
	"context"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// outItem is one thing for a connection's writer to do, in order.
type outItem struct {
	frame []byte        // a frame to write, unless closing
	delay time.Duration // wait this long first (DelayPush)
	close closeKind     // end the connection here instead of writing
}

type closeKind int

const (
	keepOpen        closeKind = iota
	closeGracefully           // after a supersede: a close handshake
	dropAbruptly              // DropConnection: as if the network went away
)

// outbox is a connection's unbounded queue of frames. It is unbounded so
// that a push never blocks the REST handler (or Go method) that caused it,
// even when the client has stopped reading; the fake's runs are short, so
// growth is bounded by the test.
type outbox struct {
	mu     sync.Mutex
	items  []outItem
	signal chan struct{} // capacity 1: "there is something to take"
}

func newOutbox() *outbox { return &outbox{signal: make(chan struct{}, 1)} }

func (o *outbox) put(it outItem) {
	o.mu.Lock()
	o.items = append(o.items, it)
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *outbox) take() []outItem {
	o.mu.Lock()
	defer o.mu.Unlock()
	items := o.items
	o.items = nil
	return items
}

// writeLoop is the connection's only writer: replies and pushes leave in
// the order they were queued. It ends when the connection does.
func (c *conn) writeLoop() {
	defer c.b.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.out.signal:
		}
		for _, it := range c.out.take() {
			if it.delay > 0 && !sleepCtx(c.ctx, it.delay) {
				return
			}
			switch it.close {
			case closeGracefully:
				_ = c.ws.Close(websocket.StatusNormalClosure, "superseded")
				c.cancel()
				return
			case dropAbruptly:
				c.abort()
				return
			}
			if err := c.ws.Write(c.ctx, websocket.MessageText, it.frame); err != nil {
				c.abort()
				return
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
