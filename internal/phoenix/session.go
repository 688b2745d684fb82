package phoenix

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// session is one WebSocket connection. Three goroutines serve it: Run's
// own goroutine keeps it alive (heartbeats), the reader dispatches
// frames, and the writer drains the outbox so that Join, Leave and timers
// never block on the network. Every field below conn/ctx/cancel/wake is
// guarded by the Client's mutex.
type session struct {
	c      *Client
	conn   *websocket.Conn
	ctx    context.Context // ends when the connection must close
	cancel context.CancelCauseFunc
	wake   chan struct{} // capacity 1: "the outbox is not empty"

	outbox       [][]byte
	pending      map[string]pendingReply // by ref
	heartbeatRef string                  // the unanswered heartbeat, if any
	ticks        int                     // heartbeat ticks so far

	// The connect phase: OnConnected fires once every join sent before it
	// has been answered; healthy records whether all of them were ok.
	awaiting  map[string]bool
	allJoined bool
	announced bool
	healthy   bool

	closed  bool
	timers  map[*rejoinTimer]struct{}
	timerWG sync.WaitGroup
}

type replyKind int

const (
	heartbeatReply replyKind = iota
	joinReply
	leaveReply
)

// pendingReply is a request waiting for its phx_reply.
type pendingReply struct {
	kind  replyKind
	topic string
	tick  int // s.ticks when it was sent
}

type rejoinTimer struct{ t *time.Timer }

// serve runs one connection until it fails or ctx ends. healthy reports
// whether every join of its connect phase succeeded; err is why it ended.
func (c *Client) serve(ctx context.Context, conn *websocket.Conn) (healthy bool, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := &session{
		c:         c,
		conn:      conn,
		ctx:       sctx,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
		pending:   make(map[string]pendingReply),
		awaiting:  make(map[string]bool),
		allJoined: true,
		timers:    make(map[*rejoinTimer]struct{}),
	}
	c.attach(s)
	var wg sync.WaitGroup
	wg.Go(s.writeLoop)
	wg.Go(s.readLoop)
	s.keepAlive()

	err = context.Cause(sctx)
	c.detach(s)
	_ = conn.CloseNow() // unblocks the reader; the error only says it was already closed
	wg.Wait()
	s.stopTimers()
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.healthy, err
}

// attach makes s current and queues the join of every registered topic,
// in registration order, as one step so a concurrent Join is neither
// missed nor sent twice.
func (c *Client) attach(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = s
	for _, r := range c.order {
		r.joinRef = ""
		r.rejoins = 0
		s.join(r)
	}
	c.connected.Store(true)
}

func (c *Client) detach(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.closed = true
	if c.sess == s {
		c.sess = nil
	}
	c.connected.Store(false)
}

// join sends r's phx_join. The caller holds c.mu.
func (s *session) join(r *registration) {
	ref := s.c.newRef()
	r.joinRef = ref
	s.pending[ref] = pendingReply{kind: joinReply, topic: r.topic, tick: s.ticks}
	if !s.announced {
		s.awaiting[ref] = true
	}
	s.send(Frame{JoinRef: ref, Ref: ref, Topic: r.topic, Event: EventJoin})
}

// leave sends r's phx_leave. The caller holds c.mu.
func (s *session) leave(r *registration) {
	ref := s.c.newRef()
	s.pending[ref] = pendingReply{kind: leaveReply, topic: r.topic, tick: s.ticks}
	s.send(Frame{JoinRef: r.joinRef, Ref: ref, Topic: r.topic, Event: EventLeave})
}

// send queues f for the writer. The caller holds c.mu.
func (s *session) send(f Frame) {
	if s.closed {
		return
	}
	b, err := Encode(f)
	if err != nil { // cannot happen for the frames the client builds
		s.c.log.Error("phoenix: cannot encode frame", "topic", f.Topic, "event", f.Event, "err", err)
		return
	}
	s.outbox = append(s.outbox, b)
	select {
	case s.wake <- struct{}{}:
	default: // the writer has already been woken and will see this frame
	}
}

func (s *session) writeLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		s.c.mu.Lock()
		batch := s.outbox
		s.outbox = nil
		s.c.mu.Unlock()
		for _, b := range batch {
			if err := s.conn.Write(s.ctx, websocket.MessageText, b); err != nil {
				s.cancel(fmt.Errorf("%w: write: %w", ErrConnectionLost, err))
				return
			}
		}
	}
}

// keepAlive heartbeats until the session ends, ending it itself when a
// heartbeat or a join goes unanswered for a whole interval.
func (s *session) keepAlive() {
	t := time.NewTicker(s.c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			if err := s.beat(); err != nil {
				s.c.log.Warn("phoenix: closing an unresponsive connection", "err", err)
				s.cancel(err)
				return
			}
		}
	}
}

func (s *session) beat() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.ticks++
	if s.heartbeatRef != "" {
		return ErrHeartbeatTimeout
	}
	for _, p := range s.pending {
		if p.kind == joinReply && p.tick <= s.ticks-2 {
			return fmt.Errorf("%w: %s", ErrJoinTimeout, p.topic)
		}
	}
	ref := s.c.newRef()
	s.heartbeatRef = ref
	s.pending[ref] = pendingReply{kind: heartbeatReply, topic: TopicPhoenix, tick: s.ticks}
	s.send(Frame{Ref: ref, Topic: TopicPhoenix, Event: EventHeartbeat})
	return nil
}

// scheduleRejoin joins r again after wait unless, by then, the session
// has ended, r was left, or r was joined some other way. The caller holds
// c.mu.
func (s *session) scheduleRejoin(r *registration, wait time.Duration) {
	if s.closed {
		return
	}
	h := &rejoinTimer{}
	s.timerWG.Add(1)
	// h.t is assigned under c.mu, which the callback takes first, so the
	// callback always sees it.
	h.t = time.AfterFunc(wait, func() {
		defer s.timerWG.Done()
		s.c.mu.Lock()
		defer s.c.mu.Unlock()
		delete(s.timers, h)
		if s.closed || s.c.byTopic[r.topic] != r || r.joinRef != "" {
			return
		}
		s.join(r)
	})
	s.timers[h] = struct{}{}
}

// stopTimers cancels pending rejoins and waits for any already firing, so
// no timer goroutine outlives the session. Call it after detach.
func (s *session) stopTimers() {
	s.c.mu.Lock()
	timers := s.timers
	s.timers = nil
	s.c.mu.Unlock()
	for h := range timers {
		if h.t.Stop() {
			s.timerWG.Done()
		}
	}
	s.timerWG.Wait()
}
