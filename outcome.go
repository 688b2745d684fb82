package bandonce

import (
	"context"
	"log/slog"
)

// OutcomeKind says how one delivery of a message ended.
type OutcomeKind int

const (
	// Replied: the reply was posted and the message marked processed.
	Replied OutcomeKind = iota + 1
	// NoReply: the handler returned no reply; the message was consumed.
	NoReply
	// DuplicateDropped: the reply was already in the room (an earlier
	// delivery posted it); it was not posted again.
	DuplicateDropped
	// Failed: the handler failed; the message was marked failed and comes
	// back through /next.
	Failed
	// DeadLettered: the message was given up on and consumed.
	DeadLettered
	// Interrupted: an interrupt aborted the cycle; nothing was posted and
	// the message was consumed.
	Interrupted
	// Stopped: a stop aborted the cycle; the message stays for replay.
	Stopped
	// AckPending: the reply is decided but the processed mark failed; only
	// the mark is retried.
	AckPending
	// Acknowledged: a pending processed mark was retried and landed.
	Acknowledged
)

var outcomeNames = [...]string{"", "replied", "no-reply", "duplicate-dropped", "failed", "dead-lettered", "interrupted", "stopped", "ack-pending", "acknowledged"}

func (k OutcomeKind) String() string {
	if k > 0 && int(k) < len(outcomeNames) {
		return outcomeNames[k]
	}
	return "unknown"
}

// Outcome describes how one delivery ended.
type Outcome struct {
	Kind      OutcomeKind
	RoomID    string
	MessageID string
	Attempt   int
	DedupKey  string
	// Err is the handler's error for Failed and DeadLettered.
	Err error
}

func (s *Shell) reportOutcome(o Outcome) {
	s.mu.Lock()
	d := s.oneShot
	r := s.rooms[o.RoomID]
	if int(o.Kind) < len(s.counts) {
		s.counts[o.Kind]++
	}
	s.mu.Unlock()
	if d != nil {
		d.count(o.Kind)
	}
	if r != nil {
		r.recordOutcome(o) // reportOutcome runs on the room's goroutine
	}
	s.logOutcome(o)
	if o.Kind == DeadLettered && s.cfg.Hooks.DeadLetter != nil {
		s.cfg.Hooks.DeadLetter(o)
	}
	if s.cfg.Hooks.Outcome != nil {
		s.cfg.Hooks.Outcome(o)
	}
}

// recordOutcome records an outcome in the room's open delivery. It runs on the
// room's goroutine, from reportOutcome.
func (r *room) recordOutcome(o Outcome) {
	if r.delivery.MessageID == o.MessageID {
		r.delivery.Outcome, r.delivery.Attempt = o.Kind, o.Attempt
	}
}

// logOutcome writes the line of a delivery's outcome, at
// Config.OutcomeLogLevel.
func (s *Shell) logOutcome(o Outcome) {
	level := s.cfg.OutcomeLogLevel
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("room", o.RoomID), slog.String("message", o.MessageID),
		slog.String("outcome", o.Kind.String()), slog.Int("attempt", o.Attempt),
	}
	if o.DedupKey != "" {
		attrs = append(attrs, slog.String("key", o.DedupKey))
	}
	if o.Err != nil {
		attrs = append(attrs, slog.Any("err", o.Err))
	}
	s.log.LogAttrs(context.Background(), level, "bandonce: outcome", attrs...)
}
