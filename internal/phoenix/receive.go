package phoenix

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/coder/websocket"
)

// readLoop is the receive goroutine: it reads frames in order and runs
// handlers and callbacks on itself, never while holding the Client's
// mutex, so they may call Join and Leave.
func (s *session) readLoop() {
	s.announceIfReady() // nothing to join: connected at once
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			s.cancel(fmt.Errorf("%w: read: %w", ErrConnectionLost, err))
			return
		}
		if typ != websocket.MessageText {
			s.c.log.Warn("phoenix: skipping a binary message", "bytes", len(data))
			continue
		}
		f, err := Decode(data)
		if err != nil {
			s.c.log.Warn("phoenix: skipping a bad frame", "err", err, "bytes", len(data))
			continue
		}
		s.handle(f)
	}
}

func (s *session) handle(f Frame) {
	switch {
	case f.Event == EventReply:
		s.handleReply(f)
	case f.Topic == TopicPhoenix:
		s.c.log.Debug("phoenix: ignoring a protocol push", "event", f.Event)
	case f.Event == EventError || f.Event == EventClose:
		s.handleChannelDown(f)
	default:
		s.dispatch(f)
	}
}

// dispatch hands a push to its topic's handler when the topic is joined
// on this connection and the push does not belong to an older join.
func (s *session) dispatch(f Frame) {
	s.c.mu.Lock()
	r := s.c.byTopic[f.Topic]
	deliver := r != nil && r.joinRef != "" && (f.JoinRef == "" || f.JoinRef == r.joinRef)
	var h Handler
	if deliver {
		h = r.handler
	}
	s.c.mu.Unlock()
	if !deliver {
		s.c.log.Debug("phoenix: dropping a push for a topic not joined", "topic", f.Topic, "event", f.Event)
		return
	}
	h(f.Event, f.Payload)
}

func (s *session) handleReply(f Frame) {
	var reply Reply
	if err := json.Unmarshal(f.Payload, &reply); err != nil {
		s.c.log.Warn("phoenix: reply payload is not a reply", "topic", f.Topic, "err", err)
		reply = Reply{Status: "error", Response: f.Payload}
	}
	ok := reply.Status == "ok"

	s.c.mu.Lock()
	p, known := s.pending[f.Ref]
	if !known || p.topic != f.Topic {
		s.c.mu.Unlock()
		s.c.log.Debug("phoenix: dropping a reply to no request", "topic", f.Topic, "ref", f.Ref)
		return
	}
	delete(s.pending, f.Ref)
	refused, joined := false, false
	switch p.kind {
	case heartbeatReply:
		if s.heartbeatRef == f.Ref {
			s.heartbeatRef = ""
		}
	case joinReply:
		// A reply to a join since superseded (rejoined or left) changes
		// nothing but still counts for the connect phase.
		if r := s.c.byTopic[p.topic]; r != nil && r.joinRef == f.Ref {
			if ok {
				r.joinedAt = time.Now()
				joined = !s.closed
			} else {
				r.joinRef = ""
				refused = !s.closed
			}
		}
		if s.awaiting[f.Ref] {
			delete(s.awaiting, f.Ref)
			s.allJoined = s.allJoined && ok
		}
	case leaveReply:
	}
	s.c.mu.Unlock()

	if refused {
		reply.Response = s.c.key.ScrubBytes(reply.Response)
		s.c.log.Warn("phoenix: join refused", "topic", f.Topic, "response", string(reply.Response))
		if s.c.cfg.OnJoinError != nil {
			s.c.cfg.OnJoinError(f.Topic, reply.Response)
		}
	}
	if joined && s.c.cfg.OnJoined != nil {
		s.c.cfg.OnJoined(f.Topic)
	}
	if p.kind == joinReply {
		s.announceIfReady()
	}
}

// handleChannelDown reacts to the server ending a joined channel
// (phx_error when it crashed, phx_close when it stopped): the topic stays
// registered and is joined again after a backoff.
func (s *session) handleChannelDown(f Frame) {
	s.c.mu.Lock()
	r := s.c.byTopic[f.Topic]
	if r == nil || r.joinRef == "" || (f.JoinRef != "" && f.JoinRef != r.joinRef) {
		s.c.mu.Unlock()
		s.c.log.Debug("phoenix: ignoring the end of a channel not joined", "topic", f.Topic, "event", f.Event)
		return
	}
	r.joinRef = ""
	if !r.joinedAt.IsZero() && time.Since(r.joinedAt) >= s.c.cfg.HeartbeatInterval {
		r.rejoins = 0 // it stayed up: this failure starts a new run
	}
	wait := s.c.backoff.delay(r.rejoins)
	r.rejoins++
	s.scheduleRejoin(r, wait)
	s.c.mu.Unlock()
	s.c.log.Warn("phoenix: channel ended by the server; rejoining", "topic", f.Topic, "event", f.Event, "in", wait)
}

// announceIfReady fires OnConnected once the connect phase's joins have
// all been answered, and records whether they all succeeded.
func (s *session) announceIfReady() {
	s.c.mu.Lock()
	ready := !s.announced && !s.closed && len(s.awaiting) == 0
	if ready {
		s.announced = true
		s.healthy = s.allJoined
	}
	s.c.mu.Unlock()
	if ready && s.c.cfg.OnConnected != nil {
		s.c.cfg.OnConnected()
	}
}
