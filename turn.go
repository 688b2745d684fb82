package bandonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/core"
)

// ErrNotInTurn is returned by a Message's effects (Send, Event, Step and
// the room tools that change something) called outside the handler call
// the Message was given to: after the handler returned, or on a Message
// the shell did not deliver.
var ErrNotInTurn = errors.New("bandonce: not inside the handler's turn")

// EventType is the type of an event: what it reports.
type EventType string

// The event types Band accepts.
const (
	EventThought    EventType = "thought"
	EventToolCall   EventType = "tool_call"
	EventToolResult EventType = "tool_result"
	EventError      EventType = "error"
	EventTask       EventType = "task"
	// EventAttention asks a human for something; its Metadata must say
	// which "kind": question, assumption, failure or review.
	EventAttention EventType = "attention"
)

// Event is what a handler reports to the room besides messages: a thought,
// a tool call and its result, an error, a task, or a request for a human's
// attention. Events need no mention.
type Event struct {
	Type EventType
	// Content is the human-readable text. It must not be blank; Band
	// takes at most 16384 characters.
	Content string
	// Metadata is the event's structured data (for tool_call, Band's
	// convention is {"function": {"name", "arguments"}, "id", "type"}).
	// Its "dedup_key" member is the shell's: leave it unset. Band takes at
	// most 64 KiB of it, serialized.
	Metadata map[string]any
	// DedupKey names the event as a unit of work; it is posted at most
	// once per room. Empty means a key derived from the message id and
	// the event's place among this turn's events without a DedupKey.
	DedupKey string
}

// Limits Band sets on an event.
const (
	maxEventContent  = 16384 // characters
	maxEventMetadata = 65536 // serialized bytes
)

// MaxStepResult bounds the result a Step records in the ledger.
const MaxStepResult = 1 << 20

// turn is one handler call's share of the room: the effects the handler
// produces while it runs, each guarded like the final reply. Effects run
// one at a time (a step's fn runs outside the lock), so default keys are
// handed out in the order the handler asks for them.
type turn struct {
	r       *room
	cy      *cycle
	msgID   string
	attempt int
	// inherited: an earlier life may have attempted the message, and so
	// sent some of the turn's effects (see room.inherited).
	inherited bool
	// life bounds the effects' requests and bookkeeping: it ends only
	// when the room's handlers are cut off, not when a signal cancels
	// the handler, so a POST in flight learns its outcome.
	life context.Context

	mu      sync.Mutex
	closed  bool
	sends   int // effects given default keys so far, by kind
	events  int
	writes  map[string]int  // agent-API writes given default keys so far, by kind (agentapi.go)
	running map[string]bool // steps whose fn is running
}

func (r *room) newTurn(life context.Context, cy *cycle, messageID string, attempt int) *turn {
	return &turn{r: r, cy: cy, msgID: messageID, attempt: attempt, inherited: r.inherited(messageID), life: life, running: map[string]bool{}}
}

// close ends the turn: later effects return ErrNotInTurn, and the room
// may use its guard again on its own goroutine.
func (t *turn) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
}

// forbidden returns why the turn may change nothing now: the cycle was
// aborted by a signal (its cause), or the caller's context ended.
func (t *turn) forbidden(ctx context.Context) error {
	if cause := t.r.ctl.abortCause(t.cy); cause != nil {
		return cause
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// abortCause returns the signal that aborted the cycle, if one did.
func (c *roomControl) abortCause(cy *cycle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cy.abort
}

// effectCtx carries ctx's values but not its cancellation: the effect's
// requests end with the turn's life, so that a POST already sent learns
// its outcome even when the handler is cancelled meanwhile.
func (t *turn) effectCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ectx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(t.life, func() { cancel(context.Cause(t.life)) })
	return ectx, func() { stop(); cancel(nil) }
}

// Send posts a message to the room now, before the handler returns, at
// most once per dedup key: the same guard as the final reply (the ledger
// first, the room read only when it can find something, never a blind
// re-POST). A handler may send any number of messages.
//
// A Reply without DedupKey gets "msg:<message id>:send:<n>", n counting
// this turn's Sends without a DedupKey from 1: the same at every delivery
// of a handler that sends in the same order, so a redelivery after a crash
// skips what was already sent. A handler whose sends depend on something
// that may change between deliveries should give each a DedupKey.
//
// Send returns nil once the message is in the room, whether this call
// posted it or an earlier delivery did. After an interrupt or a stop
// reached the room it sends nothing and returns the cause (ErrInterrupted,
// ErrStopped); a Band refusal is an *APIError (wrapped with Permanent
// when retrying cannot help).
func (m *Message) Send(ctx context.Context, rep Reply) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	rep.Mentions = append([]string(nil), rep.Mentions...)
	if len(rep.Mentions) == 0 && m.SenderID != "" {
		rep.Mentions = []string{m.SenderID}
	}
	if err := validateReply(&rep, m.turn.r.s.cfg.MaxResponseBytes); err != nil {
		return fmt.Errorf("bandonce: send: %w", err)
	}
	return m.turn.emit(ctx, func(t *turn) effect {
		if rep.DedupKey != "" {
			return effect{key: rep.DedupKey, defaultKey: derivedKey(t.msgID, rep.DedupKey), reply: &rep}
		}
		t.sends++
		return effect{key: DefaultKey(t.msgID) + ":send:" + strconv.Itoa(t.sends), defaultKey: true, reply: &rep}
	})
}

// Event posts an event to the room now, at most once per dedup key, with
// the same guard as Send. Its key travels in the event's metadata, not in
// its text. An Event without DedupKey gets "msg:<message id>:event:<n>",
// n counting this turn's Events without a DedupKey from 1. The errors are
// Send's.
func (m *Message) Event(ctx context.Context, ev Event) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	if err := validateEvent(&ev); err != nil {
		return fmt.Errorf("bandonce: event: %w", err)
	}
	return m.turn.emit(ctx, func(t *turn) effect {
		if ev.DedupKey != "" {
			return effect{key: ev.DedupKey, defaultKey: derivedKey(t.msgID, ev.DedupKey), event: &ev}
		}
		t.events++
		return effect{key: DefaultKey(t.msgID) + ":event:" + strconv.Itoa(t.events), defaultKey: true, event: &ev}
	})
}

// emit sends the effect next(t) describes, under the turn's lock.
func (t *turn) emit(ctx context.Context, next func(*turn) effect) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrNotInTurn
	}
	e := next(t)
	e.msg, e.inherited = t.msgID, t.inherited
	if err := t.forbidden(ctx); err != nil {
		return err
	}
	ectx, cancel := t.effectCtx(ctx)
	defer cancel()
	_, f := t.r.send(ectx, t.attempt, e, func(bool) error { return t.forbidden(ctx) })
	for f != nil && f.kind == failSettle {
		// An earlier send of this effect may still land. The handler is
		// waiting for its effect anyway: it waits here until the send
		// has settled, then the guard reads the room.
		if err := sleep(ctx, time.Until(f.until)); err != nil {
			return fmt.Errorf("bandonce: %s (key %q): waiting for an earlier send to settle: %w", f.call, e.key, err)
		}
		if err := t.forbidden(ctx); err != nil {
			return err
		}
		_, f = t.r.send(ectx, t.attempt, e, func(bool) error { return t.forbidden(ctx) })
	}
	if f == nil {
		return nil
	}
	if f.kind == failAborted {
		return f.err
	}
	if fatal := asFatal(f.err); fatal != nil {
		t.r.s.failRun(fatal)
	}
	if errors.Is(f.err, ErrKeyInOutput) {
		return fmt.Errorf("bandonce: %s: %w", f.call, f.err) // the dedup key may be what holds it
	}
	return fmt.Errorf("bandonce: %s (key %q): %w", f.call, e.key, f.err)
}

func validateEvent(ev *Event) error {
	switch ev.Type {
	case EventThought, EventToolCall, EventToolResult, EventError, EventTask, EventAttention:
	default:
		return Permanent(fmt.Errorf("unknown event type %q", ev.Type))
	}
	if blank(ev.Content) {
		return Permanent(errors.New("content is blank"))
	}
	if n := utf8.RuneCountInString(ev.Content); n > maxEventContent {
		return Permanent(fmt.Errorf("content is %d characters; Band takes at most %d", n, maxEventContent))
	}
	if ev.DedupKey != "" {
		if err := core.ValidateKey(ev.DedupKey); err != nil {
			return Permanent(err)
		}
	}
	if _, taken := ev.Metadata[core.MetadataKey]; taken {
		return Permanent(fmt.Errorf("metadata member %q is reserved for the dedup key; set DedupKey instead", core.MetadataKey))
	}
	if ev.Type == EventAttention {
		switch ev.Metadata["kind"] {
		case "question", "assumption", "failure", "review":
		default:
			return Permanent(errors.New(`an attention event needs metadata "kind": question, assumption, failure or review`))
		}
	}
	raw, err := json.Marshal(withKey(ev.Metadata, strings.Repeat("k", core.MaxKeyLen)))
	if err != nil {
		return Permanent(fmt.Errorf("metadata does not encode as JSON: %w", err))
	}
	if len(raw) > maxEventMetadata {
		return Permanent(fmt.Errorf("metadata is %d bytes serialized; Band takes at most %d", len(raw), maxEventMetadata))
	}
	ev.Metadata = maps.Clone(ev.Metadata) // the caller may change theirs while it is sent
	return nil
}

// Step runs fn, a side effect outside Band, at most once per message and
// step name as far as the Ledger can know: the first run records fn's
// result in the ledger, and a later delivery of the message returns the
// recorded result without calling fn. fn gets an idempotency key that is
// the same at every delivery (derived from the agent, room, message and
// name): hand it to the external system (a payment API's Idempotency-Key)
// to cover the window between the effect and the record, where a crash
// makes the step run again. With a MemoryLedger the record is lost with
// the process, so after a crash only that key stands between the step and
// a second effect.
//
// fn runs with ctx, so an interrupt or a stop cancels it; Step does not
// call fn once a signal aborted the turn and returns the cause instead. An
// error from fn is returned as is and nothing is recorded, so the step
// runs again on a later delivery. A result larger than MaxStepResult is an
// error. Two Steps of one name must not run at the same time.
//
// An fn cut off by an interrupt or a stop returns an error that names the
// step and matches the signal (errors.Is(err, ErrInterrupted)); the shell
// logs it at info. Every Step call is logged at debug (name, key, whether
// fn ran or the ledger's result was replayed, duration, error) and passed
// to Hooks.Step, which package bandonce/otel turns into a span.
func (m *Message) Step(ctx context.Context, name string, fn func(ctx context.Context, idempotencyKey string) ([]byte, error)) ([]byte, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	if err := core.ValidateKey(name); err != nil {
		return nil, fmt.Errorf("bandonce: step name: %w", Permanent(err))
	}
	return m.turn.step(ctx, name, fn)
}

func (t *turn) step(ctx context.Context, name string, fn func(context.Context, string) ([]byte, error)) ([]byte, error) {
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return nil, ErrNotInTurn
	case t.running[name]:
		t.mu.Unlock()
		return nil, fmt.Errorf("bandonce: step %q is already running in this turn", name)
	}
	t.running[name] = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.running, name)
		t.mu.Unlock()
	}()

	began := time.Now()
	run := StepRun{RoomID: t.r.id, MessageID: t.msgID, Name: name, IdempotencyKey: t.idempotencyKey(name)}
	result, err := t.runStep(ctx, &run, fn)
	run.Took, run.Err = time.Since(began), err
	t.r.stepRan(ctx, run)
	return result, err
}

// runStep is step's work: the ledger's record, else fn and the record.
func (t *turn) runStep(ctx context.Context, run *StepRun, fn func(context.Context, string) ([]byte, error)) ([]byte, error) {
	r, name := t.r, run.Name
	ledger := r.s.cfg.Ledger
	ectx, cancel := t.effectCtx(ctx)
	defer cancel()
	result, done, err := ledger.Step(ectx, r.id, t.msgID, name)
	if err != nil {
		r.s.ledgerFailed("bandonce: ledger read failed; not running the step", err, "room", r.id, "message", t.msgID, "step", name)
		return nil, fmt.Errorf("bandonce: step %q: ledger read: %w", name, err)
	}
	if done {
		run.Replayed = true
		return result, nil
	}
	if err := t.forbidden(ctx); err != nil {
		return nil, fmt.Errorf("bandonce: step %q not run: %w", name, err)
	}
	result, err = fn(ctx, run.IdempotencyKey)
	if err != nil {
		if cause := t.r.ctl.abortCause(t.cy); cause != nil && ctx.Err() != nil {
			// A signal cut the step off: say which, keeping the cause
			// for errors.Is.
			return nil, fmt.Errorf("bandonce: step %q cut off: %w (%w)", name, cause, err)
		}
		return nil, err
	}
	if len(result) > MaxStepResult {
		return nil, Permanent(fmt.Errorf("bandonce: step %q: result is %d bytes, more than MaxStepResult", name, len(result)))
	}
	// The effect happened: record it even if the handler was cancelled
	// meanwhile, on a clock of its own.
	wctx, wcancel := r.s.markCtx(ectx)
	defer wcancel()
	if err := ledger.SetStep(wctx, r.id, t.msgID, name, result); err != nil {
		// fn's effect stands and its result is good; only a later
		// delivery would run the step again, with the same key.
		r.s.ledgerFailed("bandonce: ledger write failed; the step may run again on a redelivery", err, "room", r.id, "message", t.msgID, "step", name)
	}
	return result, nil
}

// idempotencyKey is a step's key for the external system: stable across
// deliveries and restarts, distinct per agent, room, message and name, and
// short and plain enough for any API's idempotency header.
func (t *turn) idempotencyKey(name string) string {
	h := sha256.New()
	for _, part := range []string{t.r.s.agentID(), t.r.id, t.msgID, name} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return "bandonce-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Band returns the shell's client for Band's room tools, for calls this
// Message has no shortcut for (nil for a Message the shell did not
// deliver). Its calls are not guarded: what they change can happen again
// on a redelivery.
func (m *Message) Band() *band.Client {
	if m.turn == nil {
		return nil
	}
	return m.turn.r.s.client
}

// Me returns the agent the shell serves, as Band named it at start-up
// (who am I), without a request.
func (m *Message) Me() band.Agent {
	if m.turn == nil {
		return band.Agent{}
	}
	s := m.turn.r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return band.Agent{ID: s.me.ID, Name: s.me.Name, Handle: s.me.Handle, FeatureFlags: maps.Clone(s.me.FeatureFlags)}
}

// Participants lists the room's participants.
func (m *Message) Participants(ctx context.Context) ([]band.Participant, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	return m.turn.r.s.client.Participants(ctx, m.RoomID)
}

// Peers lists the agents and users this agent may add to the room: its
// peers that are not in it yet.
func (m *Message) Peers(ctx context.Context) ([]band.Peer, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	return m.turn.r.s.client.Peers(ctx, m.RoomID)
}

// AddParticipant adds a peer to the room with role ("" means member).
// Adding is a change of state, so a redelivered handler that adds the same
// participant again has the effect of one add. After an interrupt or a
// stop reached the room it changes nothing and returns the cause.
func (m *Message) AddParticipant(ctx context.Context, participantID, role string) (band.Participant, error) {
	if m.turn == nil {
		return band.Participant{}, ErrNotInTurn
	}
	if err := m.turn.forbidden(ctx); err != nil {
		return band.Participant{}, err
	}
	return m.turn.r.s.client.AddParticipant(ctx, m.RoomID, participantID, role)
}

// RemoveParticipant takes a participant out of the room; removing one who
// already left is not an error. After an interrupt or a stop reached the
// room it changes nothing and returns the cause.
func (m *Message) RemoveParticipant(ctx context.Context, participantID string) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	if err := m.turn.forbidden(ctx); err != nil {
		return err
	}
	return m.turn.r.s.client.RemoveParticipant(ctx, m.RoomID, participantID)
}

// stepRan reports a Step that returned: a debug line, an info line when a
// signal cut it off, and Hooks.Step.
func (r *room) stepRan(ctx context.Context, s StepRun) {
	args := []any{"room", s.RoomID, "message", s.MessageID, "step", s.Name, "key", s.IdempotencyKey,
		"replayed", s.Replayed, "took", s.Took.Round(time.Microsecond)}
	switch {
	case s.Err != nil && (errors.Is(s.Err, ErrInterrupted) || errors.Is(s.Err, ErrStopped)):
		r.s.log.Info("bandonce: a signal cut a step off", append(args, "err", s.Err)...)
	case s.Err != nil:
		r.s.log.Debug("bandonce: step failed", append(args, "err", s.Err)...)
	default:
		r.s.log.Debug("bandonce: step", args...)
	}
	if hook := r.s.cfg.Hooks.Step; hook != nil {
		hook(ctx, s)
	}
}
