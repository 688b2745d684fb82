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

// outbox is a connection's queue of frames. A push never blocks the REST
// handler (or Go method) that caused it, even when the client has stopped
// reading; instead a client that lets more than maxOutbox bytes queue up
// is dropped, as a server drops a consumer too slow to keep up (it
// catches up through /next once it reconnects).
type outbox struct {
	mu     sync.Mutex
	items  []outItem
	queued int           // bytes of the frames in items
	over   bool          // dropped for letting too much queue up
	signal chan struct{} // capacity 1: "there is something to take"
	drop   func()        // ends the connection
}

// maxOutbox bounds the bytes queued for one connection.
const maxOutbox = 16 << 20

// socketWriteTimeout bounds one frame's write: a client that reads
// nothing for this long is dropped, as the feed drops a stream, rather
// than held with its outbox for as long as it keeps the connection open
// (a superseded or DropConnection'd one included, whose close waits
// behind the frames queued before it).
const socketWriteTimeout = 10 * time.Second

func newOutbox(drop func()) *outbox {
	return &outbox{signal: make(chan struct{}, 1), drop: drop}
}

func (o *outbox) put(it outItem) {
	o.mu.Lock()
	if o.over {
		o.mu.Unlock()
		return
	}
	o.queued += len(it.frame)
	if o.queued > maxOutbox {
		o.over, o.items, o.queued = true, nil, 0
		o.mu.Unlock()
		o.drop() // cancels the writer's context, which ends a write blocked on the client
		return
	}
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
	o.items, o.queued = nil, 0
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
			ctx, cancel := context.WithTimeout(c.ctx, socketWriteTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, it.frame)
			cancel()
			if err != nil {
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
