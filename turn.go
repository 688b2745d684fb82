package bandonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

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
	top     place           // the turn's own effects given default keys so far
	running map[string]bool // steps whose fn is running
	// marks are the keys the details of the tasks this turn created or
	// found carry, by task id and board number (agentapi.go): an update
	// of such a task's detail keeps its marker.
	marks map[string]string
}

// place is where in the turn an effect is asked for, which its default
// key names: the turn itself, or a Step's fn (through the ctx fn is
// given), whose effects count apart. A step replayed from the ledger does
// not run fn, so its effects are not asked for again; counted with the
// turn's, their absence would shift the keys of every effect after the
// step onto keys already in the room, and those effects would be taken
// for sent. Its fields are guarded by the turn's mu.
type place struct {
	prefix string // "" for the turn; ":step:<tag>" (nested: one a step) inside a step
	sends  int    // effects given default keys so far, by kind
	events int
	writes map[string]int // agent-API writes given default keys so far, by kind (agentapi.go)
}

// placeKey is the context key of a step's place in turn t.
type placeKey struct{ t *turn }

// placeOf is ctx's place in the turn.
func (t *turn) placeOf(ctx context.Context) *place {
	if p, ok := ctx.Value(placeKey{t}).(*place); ok {
		return p
	}
	return &t.top
}

// inStep is the context a step's fn runs under: a place of its own inside
// ctx's, tagged by the step's name, which is unique in the message.
func (t *turn) inStep(ctx context.Context, name string) context.Context {
	sum := sha256.Sum256([]byte(name))
	return context.WithValue(ctx, placeKey{t}, &place{prefix: t.placeOf(ctx).prefix + ":step:" + hex.EncodeToString(sum[:8])})
}

// count counts the place's writes of a kind given default keys and
// returns the count; the caller holds the turn's mu.
func (p *place) count(kind string) int {
	if p.writes == nil {
		p.writes = map[string]int{}
	}
	p.writes[kind]++
	return p.writes[kind]
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

// effectCtx carries ctx's values but not its cancellation: the effect's
// requests end with the turn's life, so that a POST already sent learns
// its outcome even when the handler is cancelled meanwhile.
func (t *turn) effectCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ectx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(t.life, func() { cancel(context.Cause(t.life)) })
	return ectx, func() { stop(); cancel(nil) }
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
		// An earlier send of this effect may still land: the guard reads
		// the room once it has settled.
		if err := t.settle(ctx, f.until); err != nil {
			return fmt.Errorf("bandonce: %s (key %q): %w", f.call, e.key, err)
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

// settle waits until an earlier send or write of an effect can no longer
// land, as the handler waits for its effect anyway; a signal that reached
// the turn meanwhile is returned instead.
func (t *turn) settle(ctx context.Context, until time.Time) error {
	if err := sleep(ctx, time.Until(until)); err != nil {
		return fmt.Errorf("waiting for an earlier send to settle: %w", err)
	}
	return t.forbidden(ctx)
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
	result, err = fn(t.inStep(ctx, name), run.IdempotencyKey)
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
