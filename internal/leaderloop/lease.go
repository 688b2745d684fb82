package leaderloop

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Lease is one acquisition of the agent's lease, as this holder sees it
// by its own clock. It is safe for concurrent use.
type Lease struct {
	// Epoch is the acquisition's: every write under it carries it.
	Epoch int64
	clock Clock

	mu       sync.Mutex
	deadline time.Time // by clock
	lost     string    // why it is no longer held, once it is not
}

// NewLease returns epoch's lease held until deadline by clock (nil:
// Host), as an acquisition makes it; for tests of what holds a Lease.
func NewLease(epoch int64, clock Clock, deadline time.Time) *Lease {
	if clock == nil {
		clock = Host{}
	}
	return &Lease{Epoch: epoch, clock: clock, deadline: deadline}
}

// Short returns why a write or request needing margin of the lease left
// must not be made, or "" when it may.
func (l *Lease) Short(margin time.Duration) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != "" {
		return "the lease is no longer held: " + l.lost
	}
	switch left := l.deadline.Sub(l.clock.Now()); {
	case left <= 0:
		return "the lease ran out by this process's clock: it was not renewed in time"
	case left <= margin:
		return fmt.Sprintf("only %s of the lease is left by this process's clock; an intent needs more than %s", left.Round(time.Millisecond), margin)
	}
	return ""
}

// Extend moves the lease's end to deadline, by the holder's clock.
func (l *Lease) Extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = deadline
}

// End records that the lease is no longer held; the first reason stays.
func (l *Lease) End(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == "" {
		l.lost = reason
	}
}

// Left is how long the lease has left by the holder's clock.
func (l *Lease) Left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline.Sub(l.clock.Now())
}

// FailureLog keeps a repeating failure from flooding the log: the first
// one is logged, then one every failureLogEvery with the count, then the
// recovery.
type FailureLog struct {
	n      int
	logged time.Time
}

const failureLogEvery = 30 * time.Second

// Note counts a failure and logs msg if it is the first or one is due.
func (f *FailureLog) Note(log *slog.Logger, msg string, err error) {
	f.n++
	if f.n == 1 || time.Since(f.logged) >= failureLogEvery {
		f.logged = time.Now()
		log.Warn(msg, "failures", f.n, "err", err)
	}
}

// Backoff is the wait after the latest failure: 100 ms doubling to
// ceiling (never under 100 ms, so a tiny ceiling cannot spin).
func (f *FailureLog) Backoff(ceiling time.Duration) time.Duration {
	const first = 100 * time.Millisecond
	return min(first<<min(max(f.n-1, 0), 16), max(ceiling, first))
}

// Recovered logs msg if failures were noted, and forgets them.
func (f *FailureLog) Recovered(log *slog.Logger, msg string) {
	if f.n > 0 {
		log.Info(msg, "failures", f.n)
		f.n = 0
	}
}
