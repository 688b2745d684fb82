package bandonce

import (
	"context"
	"sync"
)

// roomControl is the part of a room that control signals touch. The
// receive path calls interrupt, stop and play; they take a mutex, flip
// fields and cancel a context, and never wait on I/O. Everything else about
// the message stays on the room's goroutine.
type roomControl struct {
	mu      sync.Mutex
	stopped bool
	probe   bool // a stopped room may ask /next once, to learn if a play was missed
	cur     *cycle
	wake    chan struct{} // buffered(1): a coalescing "look at /next now"
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
}

func newRoomControl() *roomControl {
	return &roomControl{wake: make(chan struct{}, 1)}
}

// mayFetch reports whether the room may ask /next now: always unless it is
// stopped, and then once per requested probe (probe true).
func (c *roomControl) mayFetch() (probe, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.stopped:
		return false, true
	case c.probe:
		c.probe = false
		return true, true
	default:
		return false, false
	}
}

// begin opens the cycle of a message /next has just served, unless the
// room was stopped while /next was in flight. A cycle begins only once
// there is a message: an interrupt that lands while the shell is merely
// asking /next finds no turn in flight, and must not consume a message
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

// probeIfStopped lets a stopped room ask /next once more, as a slow safety
// net for a play whose push was lost.
func (c *roomControl) probeIfStopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		c.probe = true
	}
}

// requestProbe lets a stopped room ask /next once and wakes it.
func (c *roomControl) requestProbe() {
	c.mu.Lock()
	c.probe = true
	c.mu.Unlock()
	c.poke()
}

// reprobe keeps a probe owed after it failed to get an answer. Unlike
// requestProbe it does not wake the room: the room's backoff paces it.
func (c *roomControl) reprobe() {
	c.mu.Lock()
	c.probe = true
	c.mu.Unlock()
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
// message is consumed.
func (c *roomControl) interrupt() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signal(ErrInterrupted)
}

// stop stops the room: the cycle in flight is aborted and left for replay,
// and no cycle begins until play.
func (c *roomControl) stop() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	return c.signal(ErrStopped)
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
func (c *roomControl) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *roomControl) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// abortedBy reports whether cause aborted the cycle.
func (c *roomControl) abortedBy(cy *cycle, cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cy.abort == cause
}
