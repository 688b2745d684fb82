package bandonce

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"time"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// room serves one chat: one message at a time, in /next order, one round
// at a time, run by the scheduler. Everything but ctl and sched belongs to
// whichever goroutine runs its round.
type room struct {
	s   *Shell
	id  string
	ctl *roomControl
	// jitter is the room's own stream of backoff waits, seeded from the
	// shell's seed and the room's id: rooms that fail at one instant
	// draw the same waits whichever goroutine draws first, so a seeded
	// run waits alike every time.
	jitter *lifecycle.Jitter
	guard  guardIndex
	fetch  context.Context         // ends when Run stops fetching or the agent leaves the room
	leave  context.CancelCauseFunc // ends fetch when the agent leaves the room
	// rejoined: the agent was added back to the room after leaving it,
	// while this room still ran; it is served afresh once it ends.
	// Guarded by the shell's mu.
	rejoined bool
	sched    roomSched  // the scheduler's, owned by its dispatcher
	q        *scheduler // the scheduler that runs it
	slot     bool       // its round holds one of q's slots (talking to Band, not in its handler)

	// failures counts handler failures per message, the budget against
	// MaxAttempts. Control aborts and crashes are never charged.
	failures map[string]*failure
	// unsent holds replies whose post failed ambiguously, so the next
	// delivery re-guards and posts them without running the handler again.
	unsent map[string]*Reply
	// consumeOnServe holds messages interrupted before their claim
	// succeeded: the next delivery consumes them without a handler.
	consumeOnServe map[string]bool
	// deadLettering holds the cause of each message given up on whose
	// dead letter is not finished (its failed mark, the room's notice,
	// the consuming marks): the next delivery finishes it without running
	// the handler again.
	deadLettering map[string]error
	// silenced holds the dead letters whose room notice an interrupt
	// withheld: a later delivery that finishes one sends no notice either.
	silenced map[string]bool
	// heldAcks holds the outcomes of messages whose processed mark waits
	// for their sends to settle (see holdAck).
	heldAcks map[string]Outcome
	// firstAttempt is, per message, Band's attempt number of this life's
	// first claim of it: above 1, an earlier life may have sent for it.
	firstAttempt map[string]int

	// settleUntil is when the send of unknown outcome that holds the
	// room's head message has settled; the room fetches nothing before.
	// held is that message's cycle, kept open meanwhile so that a signal
	// that lands during the wait still reaches it.
	settleUntil time.Time
	held        *heldCycle

	// ledgerChecked: a durable ledger was brought up to the room in this
	// life (catchUpLedger), so its "no record" now means "never tried".
	ledgerChecked bool

	errStreak     int       // consecutive rounds that ended in an error, for backoff
	retryAt       time.Time // when the held message's next attempt is due (see roomControl.hold)
	lastStale     string    // a message /next served though Band says it is done
	stopAnnounced bool      // the log already says this room waits for play
	delivery      Delivery  // the delivery in flight, for the hooks
}

// roundEnd is how one round of the room ended, and so what it does next.
type roundEnd int

const (
	endNext    roundEnd = iota // ask /next again at once
	endIdle                    // nothing to do: wait for a wake-up or the poll
	endBackoff                 // something failed: wait with backoff
	endHeld                    // a failed message waits for its next attempt, and the room with it
	endStopped                 // the room is stopped: wait for play
	endSettle                  // a send of unknown outcome may still land: wait until settleUntil
	endGone                    // the room is no longer ours
)

func newRoom(s *Shell, q *scheduler, id string) *room {
	r := &room{
		s: s, id: id, q: q,
		failures:       make(map[string]*failure),
		unsent:         make(map[string]*Reply),
		consumeOnServe: make(map[string]bool),
		deadLettering:  make(map[string]error),
		silenced:       make(map[string]bool),
		heldAcks:       make(map[string]Outcome),
		firstAttempt:   make(map[string]int),
		jitter:         roomJitter(s.jitterSeed, id),
	}
	r.ctl = newRoomControl(func() { q.wake(r) }, func() { q.catchUp(r) })
	return r
}

// roomJitter is room id's jitter stream under the shell's seed.
func roomJitter(seed uint64, id string) *lifecycle.Jitter {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return lifecycle.NewJitter(seed ^ h.Sum64())
}

// round runs one round of the room and says what it asks for next: a
// room with more to do runs again, one that waits says for how long, and
// whether that look only guards against a lost push (the idle budget's).
// A handler in flight is bounded by hard.
func (r *room) round(hard context.Context) roundDone {
	done := roundDone{r: r}
	if r.fetch.Err() != nil {
		done.gone = true
		return done
	}
	switch r.serveNext(r.fetch, hard) {
	case endNext:
		r.errStreak = 0
		done.again = true
	case endIdle:
		r.errStreak = 0
		r.guard.release()
		r.oneShot(func(d *drainTracker) { d.idle(r, false) })
		done.wait, done.budgeted = r.s.idleWait(), true
	case endBackoff:
		r.errStreak++
		r.oneShot(func(d *drainTracker) { d.busy(r) })
		done.wait = r.jitter.Backoff(r.s.cfg.Retry.BaseDelay, r.s.cfg.Retry.MaxDelay, r.errStreak)
	case endHeld:
		r.errStreak = 0
		r.oneShot(func(d *drainTracker) { d.busy(r) })
		done.wait = time.Until(r.retryAt)
		done.again = done.wait <= 0
	case endStopped:
		// Play wakes the room; a probe now and then covers a play whose
		// push never arrived.
		wait, requested := r.ctl.untilProbe(time.Now(), r.s.cfg.ResyncInterval)
		if wait > 0 && !r.stopAnnounced {
			r.s.log.Info("bandonce: room stopped; waiting for play", "room", r.id)
		}
		r.stopAnnounced = wait > 0
		if wait > 0 {
			r.oneShot(func(d *drainTracker) { d.idle(r, true) })
		}
		done.again = wait == 0
		done.wait, done.budgeted = wait, !requested
	case endSettle:
		// Not an error, and not idle: the room looks again, at once
		// and without a request, when the send has settled.
		r.oneShot(func(d *drainTracker) { d.busy(r) })
		done.wait = time.Until(r.settleUntil)
		done.again = done.wait <= 0
	case endGone:
		done.gone = true
	}
	if r.fetch.Err() != nil {
		done.gone = true
	}
	return done
}

// serveNext fetches one message and delivers it.
func (r *room) serveNext(fetch, hard context.Context) roundEnd {
	if time.Now().Before(r.settleUntil) {
		// The head message's reply may still land: /next would serve it
		// again only for the guard to find it unsettled.
		return endSettle
	}
	probe, ok := r.ctl.mayFetch(time.Now(), r.s.cfg.ResyncInterval)
	if !ok {
		return endStopped
	}
	if id, cut := r.ctl.holding(); id != "" && !cut && time.Now().Before(r.retryAt) {
		// Woken early (a push, a play): the failed message is still at
		// the head of the room and its wait is not over.
		return endHeld
	}
	m, err := r.s.api.Next(fetch, r.id)
	var unreadable error
	if big := (*wire.TooLargeError)(nil); errors.As(err, &big) && big.Message != nil {
		// Too large to read, but its ids are known: it is consumed with a
		// reason, never served again and again at the head of the room.
		m, unreadable, err = big.Message, fmt.Errorf("message too large to read (over Config.MaxResponseBytes): %w", big), nil
	}
	if err != nil {
		if probe {
			// Without an answer the probe is still owed: dropping it would
			// leave a room whose play was lost deaf until the next reconnect.
			r.ctl.reprobe()
		}
		return r.failed("GET next", err)
	}
	if m == nil {
		if probe {
			return endStopped // the gate is still closed
		}
		return endIdle
	}
	r.oneShot(func(d *drainTracker) { d.busy(r) })
	if probe {
		// A served message proves the platform's gate is open again: the
		// play that opened it was lost.
		r.s.log.Info("bandonce: stopped room has work again; resuming", "room", r.id)
		r.ctl.play()
	}
	hard = r.beginDelivery(hard, m.ID)
	defer r.endDelivery(hard)
	cy, ok := r.resume(m.ID)
	if !ok {
		if cy, ok = r.ctl.begin(); !ok {
			return endStopped // stopped while /next was in flight: leave the message
		}
	}
	st := r.deliver(fetch, hard, cy, m, unreadable)
	if st == endSettle {
		// The cycle stays open while the send settles: a signal in the
		// wait is the cycle's, and decides before anything is sent again.
		r.held = &heldCycle{msgID: m.ID, cy: cy}
		return st
	}
	if _, owed := r.unsent[m.ID]; owed && st == endBackoff {
		// The reply was not sent (a plan limit, a guard read or the
		// ledger failed) and waits for the next round: the cycle stays
		// open meanwhile, so a signal in the backoff still withdraws it,
		// and its next POST counts as one sent again (see lateSignal).
		cy.resent = true
		r.held = &heldCycle{msgID: m.ID, cy: cy}
		return st
	}
	r.ctl.end(cy)
	return st
}

// inherited reports whether an earlier life may have attempted the
// message, and so sent for it: this life's first claim of it was not
// Band's first attempt.
func (r *room) inherited(msgID string) bool { return r.firstAttempt[msgID] != 1 }

// heldCycle is a message's cycle kept open across rounds while a send of
// its reply settles.
type heldCycle struct {
	msgID string
	cy    *cycle
}

// resume returns the held cycle of the message /next served again, if
// there is one. A held cycle of another message (Band served something
// else) is closed.
func (r *room) resume(msgID string) (*cycle, bool) {
	h := r.held
	r.held = nil
	if h == nil {
		return nil, false
	}
	if h.msgID != msgID {
		if errors.Is(r.ctl.signalled(h.cy), ErrInterrupted) {
			// An interrupt reached the held turn: its message is consumed
			// with nothing more sent when Band serves it again, whatever
			// it served in between (a stale /next).
			r.consumeOnServe[h.msgID] = true
		}
		r.ctl.end(h.cy)
		return nil, false
	}
	return h.cy, true
}

// failed classifies a failed request: the room is gone, the key is
// rejected (Run ends), Run is ending, or a retry later.
func (r *room) failed(what string, err error) roundEnd {
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
		r.s.log.Warn("bandonce: Band says the agent is not in this room; leaving it", "room", r.id, "err", err)
		return endGone
	case asFatal(err) != nil:
		r.s.failRun(asFatal(err))
		return endIdle
	case errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown) || errors.Is(err, ErrSuperseded) || errors.Is(err, errRoomRemoved):
		return endIdle
	}
	r.s.log.Warn("bandonce: request failed; backing off", "room", r.id, "call", what, "url", r.s.cfg.baseURL.String(),
		"failures", r.errStreak+1, "err", err)
	return endBackoff
}

// oneShot tells a Drain run's tracker about the room, if one is running.
func (r *room) oneShot(tell func(*drainTracker)) {
	r.s.mu.Lock()
	d := r.s.oneShot
	r.s.mu.Unlock()
	if d != nil {
		tell(d)
	}
}

// idleWait is how long an idle room sleeps before asking /next again:
// pushes wake it while the socket is up, so then it only resyncs slowly.
func (s *Shell) idleWait() time.Duration {
	if s.socketUp.Load() {
		return s.cfg.ResyncInterval
	}
	return s.cfg.PollInterval
}

// markCtx gives bookkeeping calls their own deadline, detached from
// cancellation: a mark must land even when the handler was interrupted or
// Run is shutting down.
func (s *Shell) markCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.MarkTimeout)
}

// isOwn reports whether m was written by this agent. /next should never
// serve those; if it does, they are consumed without a handler so the
// agent never answers itself.
func (r *room) isOwn(m *wire.Message) bool {
	return m.SenderType == "Agent" && m.SenderID == r.s.agentID()
}

// ledgerFailed logs a ledger call that failed, with what it was about: an
// error, unless the call was cut off because the shell is stopping (its
// context cancelled), which says nothing about the ledger.
func (s *Shell) ledgerFailed(msg string, err error, args ...any) {
	level := slog.LevelError
	if errors.Is(err, context.Canceled) {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, msg, append(args, "err", err)...)
}
