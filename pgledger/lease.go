package pgledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunLeader runs lead while this process holds the agent's lease, and
// waits as a hot standby while another process does. Call it from every
// replica of the agent, on any number of machines, with the same database:
// at most one of them runs lead at a time, with a Ledger whose writes are
// fenced by the lease.
//
// A standby asks every PollInterval, and again the moment a lease it saw
// runs out, and takes the lease when it is free, has run out, or names
// this process's Holder (the answer to its own acquisition was lost).
// Every acquisition increments the lease's epoch. The holder renews every
// third of LeaseTime, all by the database's clock; hosts' clocks never
// decide who holds it. The holder counts its lease MaxClockSkew shorter
// than the database does, so that it stops before a standby can take
// over even when its clock runs that much slow.
//
// When the lease is lost (a renewal was refused, or none succeeded before
// the lease ran out by this process's clock), lead's context is cancelled
// with a cause that errors.Is ErrLeaseLost; once lead has returned,
// RunLeader stands by again. The Ledger refuses writes from then on: a
// holder that was paused and wakes after losing the lease posts nothing
// more, because the shell posts only after its intent is written.
//
// RunLeader returns when ctx ends (nil, or lead's error if it had one
// other than ctx's, after lead has returned and the lease is released, so
// a standby takes over at once), when lead returns while the lease is held
// (lead's error, the lease released), or when the database refuses the
// lease table for a reason that will not pass by itself. While the
// database is unreachable it keeps trying and logs.
func (s *Store) RunLeader(ctx context.Context, lead func(ctx context.Context, ledger *Ledger) error) error {
	for {
		ls, err := s.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lost, err := s.hold(ctx, ls, lead)
		switch {
		case ctx.Err() != nil && (err == nil || errors.Is(err, context.Cause(ctx))):
			return nil // the caller ended it: a clean shutdown
		case !lost || ctx.Err() != nil:
			return err
		case err != nil:
			s.log.Info("pgledger: the leader returned an error after the lease was lost; standing by", "epoch", ls.epoch, "err", err)
		}
	}
}

// lease is one acquisition of the agent's lease, as this process sees it.
type lease struct {
	agent string
	epoch int64

	mu       sync.Mutex
	deadline time.Time // by this process's monotonic clock
	lost     string    // why it is no longer held, once it is not
}

// short returns why a write needing margin of the lease left must not be
// made, or "" when it may.
func (l *lease) short(margin time.Duration) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != "" {
		return "the lease is no longer held: " + l.lost
	}
	switch left := time.Until(l.deadline); {
	case left <= 0:
		return "the lease ran out by this process's clock: it was not renewed in time"
	case left <= margin:
		return fmt.Sprintf("only %s of the lease is left by this process's clock; an intent needs more than %s", left.Round(time.Millisecond), margin)
	}
	return ""
}

func (l *lease) extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = deadline
}

// end records that the lease is no longer held; the first reason stays.
func (l *lease) end(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == "" {
		l.lost = reason
	}
}

func (l *lease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// campaign waits until this process holds the lease, or ctx ends, or the
// database refuses for good.
func (s *Store) campaign(ctx context.Context) (*lease, error) {
	var failures failureLog
	announced := ""
	for {
		sent := time.Now()
		epoch, err := s.acquire(ctx)
		if err == nil && epoch > 0 {
			failures.recovered(s.log, "pgledger: database reachable again")
			return &lease{agent: s.opts.AgentID, epoch: epoch, deadline: sent.Add(s.heldFor())}, nil
		}
		wait := s.opts.PollInterval
		if err == nil {
			var holder string
			var theirs int64
			var left time.Duration
			holder, theirs, left, err = s.lookup(ctx)
			if err == nil {
				failures.recovered(s.log, "pgledger: database reachable again")
				if seen := fmt.Sprint(holder, "/", theirs); seen != announced {
					announced = seen
					s.log.Info("pgledger: standing by: another process holds the lease", "lease_holder", holder, "epoch", theirs, "left", left.Round(time.Millisecond))
				}
				wait = max(min(wait, left), time.Millisecond)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !transient(err) {
				return nil, fmt.Errorf("pgledger: campaigning for the lease of agent %q: %w", s.opts.AgentID, err)
			}
			failures.note(s.log, "pgledger: cannot reach the database to campaign for the lease; retrying", err)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// acquire takes the lease if it is free or ran out: the new epoch, or 0
// when another process holds it.
func (s *Store) acquire(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	var epoch int64
	err := s.pool.QueryRow(ctx, s.sql.acquire, s.opts.AgentID, s.opts.Holder, s.opts.LeaseTime.Microseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return epoch, err
}

// lookup reads the lease: who holds it, its epoch, and how long it has
// left by the database's clock. pgx.ErrNoRows when there is none.
func (s *Store) lookup(ctx context.Context) (holder string, epoch int64, left time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	var micros int64
	err = s.pool.QueryRow(ctx, s.sql.lookup, s.opts.AgentID).Scan(&holder, &epoch, &micros)
	return holder, epoch, time.Duration(micros) * time.Microsecond, err
}

// hold runs lead under ls, renewing it, until lead returns; lost reports
// whether the lease was lost meanwhile.
func (s *Store) hold(ctx context.Context, ls *lease, lead func(context.Context, *Ledger) error) (lost bool, err error) {
	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		s.keep(leadCtx, ls, cancel)
	}()
	s.log.Info("pgledger: lease acquired; leading", "epoch", ls.epoch)
	err = lead(leadCtx, &Ledger{store: s, lease: ls})
	// A leader that returns on its own just as the lease ran out (woken
	// from a pause to find itself superseded, say) lost it too: what it
	// returned is a symptom, and the process stands by.
	lost = errors.Is(context.Cause(leadCtx), ErrLeaseLost) || ls.short(0) != ""
	cancel(errLeadReturned)
	<-kept
	ls.end("the leader returned")
	if !lost {
		s.release(ctx, ls)
	}
	return lost, err
}

// MaxClockSkew is the bound on how far a host's clock may run slow or
// fast against the database's that the lease allows for: 1%. The
// database decides when a lease runs out, by its own clock; the holder
// stops writing and sending when its lease runs out by the host's clock,
// so it counts the lease a hundredth shorter than the database does: a
// holder whose clock runs up to 1% slow still stops before a standby
// can take over.
const MaxClockSkew = 0.01

// heldFor is how long after sending an acquisition or renewal the holder
// counts its lease as held, by its own clock: LeaseTime less what a clock
// running MaxClockSkew slow would add.
func (s *Store) heldFor() time.Duration {
	return s.opts.LeaseTime - time.Duration(float64(s.opts.LeaseTime)*MaxClockSkew)
}

// errLeadReturned stops the renewals once lead has returned.
var errLeadReturned = errors.New("pgledger: the leader returned")

// keep renews ls every third of LeaseTime until ctx ends, and cancels the
// leader with ErrLeaseLost when the lease is lost. A failed renewal is
// retried every tenth of LeaseTime while the lease lasts.
func (s *Store) keep(ctx context.Context, ls *lease, cancel context.CancelCauseFunc) {
	every, retry := s.opts.LeaseTime/3, s.opts.LeaseTime/10
	timer := time.NewTimer(every)
	defer timer.Stop()
	lose := func(reason string) {
		ls.end(reason)
		s.log.Warn("pgledger: lease lost; stopping the leader", "epoch", ls.epoch, "why", reason)
		cancel(fmt.Errorf("%w: %s", ErrLeaseLost, reason))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// After a pause (SIGSTOP, a stalled VM) this is the first thing
		// that runs: a lease that ran out meanwhile is given up at once.
		if reason := ls.short(0); reason != "" {
			lose(reason)
			return
		}
		sent := time.Now()
		renewed, err := s.renew(ctx, ls)
		switch {
		case err == nil && renewed:
			ls.extend(sent.Add(s.heldFor()))
			if reason := ls.short(0); reason != "" { // the answer came after a pause
				lose(reason)
				return
			}
			timer.Reset(every)
		case err == nil:
			lose("the database refused the renewal: another process took the lease over, or it ran out")
			return
		case ctx.Err() != nil:
			return
		default:
			left := ls.left()
			s.log.Warn("pgledger: lease renewal failed; retrying while it lasts", "epoch", ls.epoch, "left", left.Round(time.Millisecond), "err", err)
			timer.Reset(max(min(retry, left), 0))
		}
	}
}

// renew extends the lease by LeaseTime from the database's now, if it is
// still this epoch's and has not run out. The call is bounded by what is
// left of the lease.
func (s *Store) renew(ctx context.Context, ls *lease) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, min(s.callTimeout(), max(ls.left(), 0)))
	defer cancel()
	tag, err := s.pool.Exec(ctx, s.sql.renew, s.opts.AgentID, ls.epoch, s.opts.LeaseTime.Microseconds())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// release ends the lease at once, so a standby need not wait for it to
// run out. A failure only delays the takeover; it is logged.
func (s *Store) release(ctx context.Context, ls *lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout())
	defer cancel()
	tag, err := s.pool.Exec(ctx, s.sql.release, s.opts.AgentID, ls.epoch)
	switch {
	case err != nil:
		s.log.Warn("pgledger: could not release the lease; a standby takes over when it runs out", "epoch", ls.epoch, "err", err)
	case tag.RowsAffected() == 1:
		s.log.Info("pgledger: lease released", "epoch", ls.epoch)
	}
}

// whyFenced says why the fence of a write under epoch did not hold.
func (s *Store) whyFenced(ctx context.Context, epoch int64, margin time.Duration) string {
	holder, current, left, err := s.lookup(context.WithoutCancel(ctx))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "the database has no lease for the agent"
	case err != nil:
		return fmt.Sprintf("the lease is not current (looking it up failed: %v)", err)
	case current != epoch:
		return fmt.Sprintf("another process took the lease over: it is at epoch %d, held by %s", current, holder)
	case left <= 0:
		return "the lease ran out by the database's clock"
	default:
		return fmt.Sprintf("only %s of the lease was left by the database's clock; an intent needs more than %s", left.Round(time.Millisecond), margin)
	}
}

// failureLog keeps a repeating failure from flooding the log: the first
// one is logged, then one every failureLogEvery with the count, then the
// recovery.
type failureLog struct {
	n      int
	logged time.Time
}

const failureLogEvery = 30 * time.Second

func (f *failureLog) note(log *slog.Logger, msg string, err error) {
	f.n++
	if f.n == 1 || time.Since(f.logged) >= failureLogEvery {
		f.logged = time.Now()
		log.Warn(msg, "failures", f.n, "err", err)
	}
}

// backoff is the wait after the latest failure: 100 ms doubling to 5 s.
func (f *failureLog) backoff() time.Duration {
	return min(100*time.Millisecond<<min(f.n-1, 6), 5*time.Second)
}

func (f *failureLog) recovered(log *slog.Logger, msg string) {
	if f.n > 0 {
		log.Info(msg, "failures", f.n)
		f.n = 0
	}
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
