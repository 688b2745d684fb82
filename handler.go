package bandonce

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// Handler does the work for one message. It returns the reply to post, or
// nil to consume the message without posting. It must honour ctx: an
// interrupt, stop or shutdown cancels it, and context.Cause(ctx) says which
// (ErrInterrupted, ErrStopped, ErrShutdown, ErrSuperseded).
//
// The shell decides the message's fate after Handler returns, never while it
// runs, so a handler that finishes its reply before noticing a cancellation
// is judged by the cause, not by a race.
type Handler func(ctx context.Context, msg *Message) (*Reply, error)

// runHandler calls the Handler between the handler hooks.
func (r *room) runHandler(ctx context.Context, m *wire.Message, t *turn) (*Reply, error) {
	r.delivery.Attempt = t.attempt
	h := r.s.cfg.Hooks
	if h.HandlerStart == nil && h.HandlerEnd == nil {
		return r.callHandler(ctx, m, t)
	}
	d := r.delivery
	if h.HandlerStart != nil {
		if derived := h.HandlerStart(ctx, d); derived != nil {
			ctx = derived
		}
	}
	began := time.Now()
	reply, err := r.callHandler(ctx, m, t)
	if h.HandlerEnd != nil {
		h.HandlerEnd(ctx, d, time.Since(began), err)
	}
	return reply, err
}

// callHandler runs the handler, turning a panic into a *PanicError.
func (r *room) callHandler(ctx context.Context, wm *wire.Message, t *turn) (reply *Reply, err error) {
	if d := r.s.cfg.HandlerTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, fmt.Errorf("handler timed out after %s", d))
		defer cancel()
	}
	msg := &Message{
		ID: wm.ID, RoomID: r.id, Content: wm.Content,
		SenderID: wm.SenderID, SenderType: wm.SenderType, SenderName: wm.SenderName,
		Attempt: t.attempt, InsertedAt: wm.InsertedAt, turn: t,
		loadContext: func(ctx context.Context) ([]ContextItem, error) {
			return r.s.client.Context(ctx, r.id)
		},
	}
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			r.s.log.Error("bandonce: handler panicked", "room", r.id, "message", wm.ID, "panic", panicString(v), "stack", string(stack))
			reply, err = nil, &PanicError{Value: v, Stack: stack}
		}
	}()
	return r.s.cfg.Handler(ctx, msg)
}
