package bandonce

import (
	"context"
	"time"

	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/wire"
)

// Hooks observe the shell. Each is called synchronously on the goroutine
// doing the work (a room's, the socket's) and must return quickly without
// blocking: a slow hook delays that room, or every control signal. An error
// a hook receives never shows the APIKey. doc.go says what each is for.
type Hooks struct {
	// Outcome is called once each time a message's delivery has its outcome.
	Outcome func(Outcome)
	// DeadLetter is called when a message is given up on: marked failed
	// with the reason, then consumed so the room moves on.
	DeadLetter func(Outcome)
	// InvalidControl is called with a control push the shell could not
	// use, and why.
	InvalidControl func(raw []byte, err error)

	// DeliveryStart is called when /next serves a message, before the
	// shell does anything with it. The context it returns (ctx itself, or
	// a context derived from it, such as one carrying a trace span) is the
	// one the delivery's requests, handler and hooks run under; nil means
	// ctx.
	DeliveryStart func(ctx context.Context, d Delivery) context.Context
	// DeliveryEnd is called once for every DeliveryStart, when the shell
	// is done with the delivery, with its Outcome (zero when it ended
	// without one, such as at shutdown: Band serves the message again).
	DeliveryEnd func(ctx context.Context, d Delivery)
	// HandlerStart is called just before the Handler. Like DeliveryStart
	// it may return a context derived from ctx, which the Handler gets.
	HandlerStart func(ctx context.Context, d Delivery) context.Context
	// HandlerEnd is called when the Handler returns (or panics), with how
	// long it ran and its error; context.Cause(ctx) says whether a signal
	// or a shutdown cancelled it.
	HandlerEnd func(ctx context.Context, d Delivery, took time.Duration, err error)
	// GuardRead is called after each read of the room by the dedup guard,
	// with whether the reply was found there already.
	GuardRead func(ctx context.Context, d Delivery, found bool, err error)
	// Request is called after every HTTP attempt to Band's REST API,
	// retries included.
	Request func(ctx context.Context, r Request)
	// Step is called when a Message.Step returns, with whether its fn ran
	// or its result was replayed from the ledger, how long it took and
	// its error. ctx is the one the handler passed to Step.
	Step func(ctx context.Context, s StepRun)
	// Control is called for each room a control signal was applied to,
	// and once for a supersede.
	Control func(ControlSignal)
	// Socket is called when the socket has connected and joined its
	// topics (up), and when a connection ends (down, with why).
	Socket func(up bool, err error)
	// Throttle is called when Band's 429s make the shell pace every
	// request it sends (throttled, with the pace in requests a second),
	// each time it cuts that pace again, and once the pace has grown back
	// to no limit (throttled false, rate 0).
	Throttle func(throttled bool, rate float64)
	// Room is called when the shell starts serving a room (added) and
	// when it stops (removed: the agent left it, or Run is ending).
	Room func(roomID string, added bool)
}

// Delivery is one pass of a message through the shell: from /next serving
// it to its outcome, or to the shell letting it go until Band serves it
// again. The hooks that take one use RoomID and MessageID to tell
// deliveries apart; a message delivered again is a new Delivery.
type Delivery struct {
	RoomID    string
	MessageID string
	// Attempt is Band's attempt number once the message is claimed (the
	// processing mark); zero before.
	Attempt int
	// Outcome is how the delivery ended. Only DeliveryEnd sees it,
	// and it is zero when the delivery ended without one: a shutdown, a
	// claim Band refused or never answered.
	Outcome OutcomeKind
}

// Request is one HTTP attempt to Band's REST API, as Hooks.Request sees it.
type Request struct {
	// Endpoint names the call with its ids templated, such as
	// "POST /agent/chats/{id}/messages", so it can label a metric.
	Endpoint string
	// Attempt is 1 for a call's first try, 2 for its first retry, and so
	// on. The reply POST is never retried by the transport: a post that
	// may have landed is looked for in the room before it is sent again.
	Attempt int
	// Status is the HTTP status, or 0 when no response came.
	Status int
	// Took is how long the attempt took, until the response's headers,
	// including any wait for the shell's request budget.
	Took time.Duration
	// Err is why no response came (a connection error, a timeout, the
	// context ending); nil when Status is set.
	Err error
}

// ControlSignal is a control signal as the shell applied it.
type ControlSignal struct {
	// Mode is "interrupt", "stop", "play" or "supersede".
	Mode string
	// RoomID is the room it was applied to; empty for a supersede, which
	// ends the whole Run.
	RoomID string
	// InFlight reports whether an interrupt or a stop found a delivery in
	// flight in that room; it aborts it unless the reply was already on
	// its way.
	InFlight bool
}

// scrubbed wraps the hooks that carry an error so that it never shows the
// key (a handler's panic, a server's answer may quote it); errors.As still
// reaches the original error.
func (h Hooks) scrubbed(key *keyguard.Secret) Hooks {
	for _, hook := range []*func(Outcome){&h.Outcome, &h.DeadLetter} {
		if next := *hook; next != nil {
			*hook = func(o Outcome) {
				o.Err = key.Error(o.Err)
				next(o)
			}
		}
	}
	if next := h.HandlerEnd; next != nil {
		h.HandlerEnd = func(ctx context.Context, d Delivery, took time.Duration, err error) {
			next(ctx, d, took, key.Error(err))
		}
	}
	if next := h.GuardRead; next != nil {
		h.GuardRead = func(ctx context.Context, d Delivery, found bool, err error) {
			next(ctx, d, found, key.Error(err))
		}
	}
	if next := h.Request; next != nil {
		h.Request = func(ctx context.Context, r Request) {
			r.Err = key.Error(r.Err)
			next(ctx, r)
		}
	}
	if next := h.Socket; next != nil {
		h.Socket = func(up bool, err error) { next(up, key.Error(err)) }
	}
	if next := h.Step; next != nil {
		h.Step = func(ctx context.Context, s StepRun) {
			s.Err = key.Error(s.Err)
			next(ctx, s)
		}
	}
	return h
}

// StepRun is one Message.Step as Hooks.Step sees it.
type StepRun struct {
	RoomID    string
	MessageID string
	// Name is the step's name, IdempotencyKey the key its fn was (or
	// would have been) handed.
	Name           string
	IdempotencyKey string
	// Replayed: the ledger had the step's result, which Step returned
	// without calling fn.
	Replayed bool
	// Took is how long the Step call took, fn and the ledger together.
	Took time.Duration
	// Err is what Step returned: fn's error, a ledger's, or the signal
	// (ErrInterrupted, ErrStopped) that cut the step off, naming it.
	Err error
}

// requestObserver turns the transport's report of each try into the
// Request hook, or returns nil when there is no hook to call.
func requestObserver(hook func(context.Context, Request)) func(context.Context, wire.Try) {
	if hook == nil {
		return nil
	}
	return func(ctx context.Context, t wire.Try) {
		hook(ctx, Request{Endpoint: t.Endpoint, Attempt: t.Attempt, Status: t.Status, Took: t.Took, Err: t.Err})
	}
}

// beginDelivery opens the record of a delivery /next has just served and
// calls DeliveryStart; endDelivery closes it. The record is the room's:
// only its goroutine reads or writes it.
func (r *room) beginDelivery(ctx context.Context, messageID string) context.Context {
	r.delivery = Delivery{RoomID: r.id, MessageID: messageID}
	if start := r.s.cfg.Hooks.DeliveryStart; start != nil {
		if derived := start(ctx, r.delivery); derived != nil {
			return derived
		}
	}
	return ctx
}

func (r *room) endDelivery(ctx context.Context) {
	if end := r.s.cfg.Hooks.DeliveryEnd; end != nil {
		end(ctx, r.delivery)
	}
	r.delivery = Delivery{}
}

// guardRead reports a read of the room by the dedup guard.
func (r *room) guardRead(ctx context.Context, found bool, err error) {
	if hook := r.s.cfg.Hooks.GuardRead; hook != nil {
		hook(ctx, r.delivery, found, err)
	}
}

// roomEvent reports a room the shell starts or stops serving.
func (s *Shell) roomEvent(id string, added bool) {
	if hook := s.cfg.Hooks.Room; hook != nil {
		hook(id, added)
	}
}

// socketEvent reports the socket connecting or disconnecting.
func (s *Shell) socketEvent(up bool, err error) {
	if hook := s.cfg.Hooks.Socket; hook != nil {
		hook(up, err)
	}
}

// controlApplied reports a control signal applied to a room.
func (s *Shell) controlApplied(mode, roomID string, inFlight bool) {
	if hook := s.cfg.Hooks.Control; hook != nil {
		hook(ControlSignal{Mode: mode, RoomID: roomID, InFlight: inFlight})
	}
}
