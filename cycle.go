package bandonce

import (
	"context"
	"errors"
	"sync"
	"time"
)

// roomControl is the part of a room that control signals touch. The
// receive path calls interrupt, stop and play; they take a mutex, flip
// fields and cancel a context, and never wait on I/O. Everything else about
// the message stays on the room's goroutine.
type roomControl struct {
	mu      sync.Mutex
	stopped bool
	// stoppedAt is when the room last became stopped here, and lastProbe
	// when it last asked /next while stopped (see mayFetch).
	stoppedAt time.Time
	lastProbe time.Time
	probe     bool // evidence of a missed play: probe as soon as the stop's grace is over
	cur       *cycle
	wake      func() // asks the scheduler for a look at /next now; never blocks
	again     func() // asks for a look that begins after the call; never blocks
	// held is the message that waits for its next handler attempt, and
	// heldCut whether an interrupt reached it while it waited.
	held    string
	heldCut bool
}

// cycle is one message's passage through the room, from the moment /next
// serves it until its fate is committed. A signal that lands in that
// window is never lost: before the handler starts it is recorded in abort,
// while the handler runs it also cancels the handler's context, and once
// the fate is committed (the reply POST is about to be sent, or the mark
// chosen) it no longer changes this message, unless the POST provably did
// not land and is about to be sent again (late).
type cycle struct {
	abort     error                   // ErrInterrupted or ErrStopped; the last signal wins
	late      error                   // a signal that came after the commit
	cancel    context.CancelCauseFunc // set while the handler runs
	committed bool
	// resent: the cycle was held open while an earlier send of its reply
	// settled, so its next POST is a POST again (see lateSignal). The
	// room's goroutine alone reads and writes it.
	resent bool
}

func newRoomControl(wake, again func()) *roomControl {
	return &roomControl{wake: wake, again: again}
}

// stopGrace is how long a room stays stopped before a /next that serves
// a message is taken as proof that the stop was lifted. Band closes its
// gate before it pushes the stop (the push trails it by tens of
// milliseconds), so a served message normally proves a play the room did
// not hear; the grace keeps a stop whose push outran the gate from
// being undone by a probe sent in that instant.
const stopGrace = 2 * time.Second

// mayFetch reports whether the room may ask /next at now. A room that is
// not stopped always may. A stopped room asks only as a probe (probe
// true): once its stop's grace is over, at once when there is evidence that a
// play was missed (a reconnect, a message pushed while stopped), and
// otherwise every interval, so that no lost or missed play can leave it
// deaf for longer than that.
func (c *roomControl) mayFetch(now time.Time, interval time.Duration) (probe, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return false, true
	}
	if now.Before(c.probeDueLocked(interval)) {
		return false, false
	}
	c.probe, c.lastProbe = false, now
	return true, true
}

// untilProbe is how long a stopped room waits before mayFetch lets it
// probe, zero if it is not stopped (any more), and whether that probe was
// asked for (evidence of a missed play) rather than merely periodic.
func (c *roomControl) untilProbe(now time.Time, interval time.Duration) (wait time.Duration, requested bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return 0, false
	}
	return max(c.probeDueLocked(interval).Sub(now), 0), c.probe
}

func (c *roomControl) probeDueLocked(interval time.Duration) time.Time {
	due := c.lastProbe.Add(interval)
	if c.probe {
		due = c.lastProbe
	}
	if graceOver := c.stoppedAt.Add(stopGrace); due.Before(graceOver) {
		due = graceOver
	}
	return due
}

// requestProbe asks a stopped room to probe /next as soon as its stop's
// grace is over, and wakes it; a room that is not stopped just looks at /next.
func (c *roomControl) requestProbe() {
	c.mu.Lock()
	c.probe = c.stopped
	c.mu.Unlock()
	c.poke()
}

// requestCatchUp is requestProbe for a topic's answered join: the look it
// asks for begins after the call, whether or not a look was already due
// (scheduler.catchUp).
func (c *roomControl) requestCatchUp() {
	c.mu.Lock()
	c.probe = c.stopped
	c.mu.Unlock()
	c.again()
}

// reprobe keeps a probe owed after it failed to get an answer. Unlike
// requestProbe it does not wake the room: the room's backoff paces it.
func (c *roomControl) reprobe() {
	c.mu.Lock()
	c.probe = c.stopped
	c.mu.Unlock()
}

// begin opens the cycle of a message /next has just served, unless the
// room was stopped while /next was in flight. A cycle begins only once
// there is a message: an interrupt that lands while the shell is merely
// asking /next finds no cycle in flight, and must not consume a message
// that may have been posted after it.
func (c *roomControl) begin() (*cycle, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, false
	}
	c.cur = &cycle{}
	return c.cur, true
}

// end closes the cycle; later signals find nothing in flight.
func (c *roomControl) end(cy *cycle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == cy {
		c.cur = nil
	}
}

// startHandler installs the handler's cancel func, unless a signal already
// aborted the cycle or the room was stopped meanwhile: then it returns the
// cause and the handler must not start.
func (c *roomControl) startHandler(cy *cycle, cancel context.CancelCauseFunc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cy.abort != nil {
		return cy.abort
	}
	if c.stopped {
		cy.abort = ErrStopped
		return ErrStopped
	}
	cy.cancel = cancel
	return nil
}

// mayClaim is the gate of a processing claim, asked before every try of
// it: a stopped room claims nothing until play.
func (c *roomControl) mayClaim() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	return nil
}

// commit fixes the message's fate: it returns the signal that aborted the
// cycle, if any, and otherwise makes later signals no-ops for it.
func (c *roomControl) commit(cy *cycle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cy.cancel = nil
	if cy.abort != nil {
		return cy.abort
	}
	cy.committed = true
	return nil
}

// lateSignal returns a signal that landed after the commit. The shell
// asks before sending a reply again whose first POST provably did not
// land: that reply would be new output after the signal.
func (c *roomControl) lateSignal(cy *cycle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cy.late
}

// signal aborts the cycle in flight with cause. It reports whether a cycle
// was there to abort.
func (c *roomControl) signal(cause error) bool {
	cy := c.cur
	if cy == nil {
		return false
	}
	if cy.committed {
		cy.late = cause
		return true
	}
	cy.abort = cause
	if cy.cancel != nil {
		cy.cancel(cause)
	}
	return true
}

// interrupt aborts the cycle in flight, if any: nothing is posted and the
// message is consumed. A message that waits for its next attempt is the
// cycle in flight too: it is consumed at once, without another attempt.
func (c *roomControl) interrupt() bool {
	c.mu.Lock()
	inFlight := c.signal(ErrInterrupted)
	held := c.held != ""
	if held {
		c.heldCut = true
	}
	c.mu.Unlock()
	if held {
		c.poke()
	}
	return inFlight || held
}

// hold records that message id waits for its next handler attempt after
// the failure cy committed; an interrupt that reached cy after its commit
// already cuts the wait.
func (c *roomControl) hold(id string, cy *cycle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.heldCut = id, errors.Is(cy.late, ErrInterrupted)
}

// holding reports the message that waits for its next attempt, if any,
// and whether an interrupt cut its wait.
func (c *roomControl) holding() (id string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held, c.heldCut
}

// release ends the wait of the held message, which Band has served again:
// it reports whether an interrupt cut the wait of message id.
func (c *roomControl) release(id string) (cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut = c.held == id && c.heldCut
	c.held, c.heldCut = "", false
	return cut
}

// stop stops the room: the cycle in flight is aborted and left for replay,
// and no cycle begins until play.
func (c *roomControl) stop() bool {
	c.mu.Lock()
	c.setStopped(time.Now())
	inFlight := c.signal(ErrStopped)
	held := c.held != ""
	c.mu.Unlock()
	if held {
		// The waiting room learns at once that it is stopped.
		c.poke()
	}
	return inFlight || held
}

// play clears the stop and wakes the room for a /next catch-up. It reports
// whether the room was stopped.
func (c *roomControl) play() bool {
	c.mu.Lock()
	was := c.stopped
	c.stopped = false
	c.mu.Unlock()
	c.poke()
	return was
}

// poke asks the room to look at /next now; it never blocks.
func (c *roomControl) poke() { c.wake() }

// setStopped marks the room stopped as of now, unless it already was.
func (c *roomControl) setStopped(now time.Time) {
	if !c.stopped {
		c.stopped, c.stoppedAt, c.lastProbe = true, now, now
	}
}

// signalled returns the signal that reached the cycle, before its commit
// or after it, if any did.
func (c *roomControl) signalled(cy *cycle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cy.abort != nil {
		return cy.abort
	}
	return cy.late
}

// abortedBy reports whether cause aborted the cycle.
func (c *roomControl) abortedBy(cy *cycle, cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cy.abort == cause
}

// abortCause returns the signal that aborted the cycle, if one did.
func (c *roomControl) abortCause(cy *cycle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cy.abort
}
