// Package leaderloop is pgledger's leader loop: campaign for an agent's
// lease, run the leader while it is held, renewing it, stop the leader
// when it is lost, release it on a clean stop. The loop runs over a Store
// (the lease's statements: pgledger's SQL in production, the in-memory
// internal/leasemodel under the prover) and a Clock (the host's, or a
// prover replica's skewed virtual one), so that the prover's in-memory
// replicas run pgledger's own loop, not a copy of it.
package leaderloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Store is one agent's lease as the loop uses it, for one holder: each
// method is one statement, bounded by ctx.
type Store interface {
	// Acquire takes the lease if it is free, ran out, or is this
	// holder's already (the answer to its own acquisition was lost), for
	// one lease time from the database's now: the new epoch, or 0 when
	// another holder's lease is current.
	Acquire(ctx context.Context) (epoch int64, err error)
	// Lookup reads the lease: its holder, epoch, and how long it has
	// left by the database's clock (zero once it ran out); found is
	// false when there is none.
	Lookup(ctx context.Context) (holder string, epoch int64, left time.Duration, found bool, err error)
	// Renew extends epoch's lease to one lease time from the database's
	// now, if it is still current; it reports whether it did.
	Renew(ctx context.Context, epoch int64) (bool, error)
	// Release ends epoch's lease now, if it is still current; it reports
	// whether it did.
	Release(ctx context.Context, epoch int64) (bool, error)
}

// Clock is the holder's clock: the host's (Host), or, under the prover,
// a replica's that runs fast or slow against the database's.
type Clock interface {
	// Now is the clock's time; only differences between two readings
	// are used.
	Now() time.Time
	// Real is how long d of this clock lasts by the runtime's timers and
	// context deadlines, rounded up: a timer set for Real(d) never fires
	// before d has passed by this clock.
	Real(d time.Duration) time.Duration
}

// Host is the host's clock: time.Now, monotonic.
type Host struct{}

// Now is time.Now.
func (Host) Now() time.Time { return time.Now() }

// Real is d.
func (Host) Real(d time.Duration) time.Duration { return d }

// Config is one holder's loop.
type Config struct {
	// AgentID names the agent in errors.
	AgentID string
	// Store is the lease's statements. Required.
	Store Store
	// Clock is the holder's clock; nil means Host.
	Clock Clock
	// LeaseTime is the lease's length, the one the Store grants.
	// Required.
	LeaseTime time.Duration
	// PollInterval is how often a standby asks whether the lease is free
	// (a release ends a lease early; only asking finds that out).
	// Required.
	PollInterval time.Duration
	// CallTimeout bounds every statement. Required.
	CallTimeout time.Duration
	// MaxClockSkew is the fraction by which the holder's clock may run
	// slow against the database's: the holder counts its lease that much
	// shorter than the database does.
	MaxClockSkew float64
	// Transient reports whether a statement's error may pass by itself
	// (the database is unreachable or restarting); a campaign that meets
	// any other error ends. Nil means every error but context.Canceled.
	Transient func(error) bool
	// Lost is the sentinel the leader's context is cancelled with (by
	// wrapping) when the lease is lost. Required.
	Lost error
	// Log receives what the loop does. Nil means slog.Default().
	Log *slog.Logger
}

// Run runs lead while this holder holds the lease, and waits as a hot
// standby while another does, until ctx ends (nil, or lead's error other
// than ctx's, after lead has returned and the lease is released), lead
// returns while the lease is held (lead's error, the lease released), or
// a campaign meets an error that will not pass by itself. pgledger's
// Store.RunLeader documents the protocol.
func Run(ctx context.Context, cfg Config, lead func(ctx context.Context, ls *Lease) error) error {
	l := &loop{cfg: cfg, clock: cfg.Clock, log: cmp.Or(cfg.Log, slog.Default()), transient: cfg.Transient}
	if l.clock == nil {
		l.clock = Host{}
	}
	if l.transient == nil {
		l.transient = func(err error) bool { return !errors.Is(err, context.Canceled) }
	}
	for {
		ls, err := l.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lost, err := l.hold(ctx, ls, lead)
		switch {
		case ctx.Err() != nil && (err == nil || errors.Is(err, context.Cause(ctx))):
			return nil // the caller ended it: a clean shutdown
		case !lost || ctx.Err() != nil:
			return err
		case err != nil:
			l.log.Info("pgledger: the leader returned an error after the lease was lost; standing by", "epoch", ls.Epoch, "err", err)
		}
	}
}

// loop is one Run.
type loop struct {
	cfg       Config
	clock     Clock
	log       *slog.Logger
	transient func(error) bool
}

// heldFor is how long after sending an acquisition or renewal the holder
// counts its lease as held, by its own clock: LeaseTime less what a clock
// running MaxClockSkew slow would add.
func (l *loop) heldFor() time.Duration {
	return l.cfg.LeaseTime - time.Duration(float64(l.cfg.LeaseTime)*l.cfg.MaxClockSkew)
}

// sleep waits d by the holder's clock, or until ctx ends.
func (l *loop) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(l.clock.Real(d))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// campaign waits until this holder holds the lease, or ctx ends, or the
// database refuses for good.
func (l *loop) campaign(ctx context.Context) (*Lease, error) {
	var failures FailureLog
	announced := ""
	for {
		sent := l.clock.Now()
		epoch, err := l.call(ctx, func(ctx context.Context) (int64, error) { return l.cfg.Store.Acquire(ctx) })
		if err == nil && epoch > 0 {
			failures.Recovered(l.log, "pgledger: database reachable again")
			return &Lease{Epoch: epoch, clock: l.clock, deadline: sent.Add(l.heldFor())}, nil
		}
		wait := l.cfg.PollInterval
		if err == nil {
			var holder string
			var theirs int64
			var left time.Duration
			var found bool
			asked := l.clock.Now()
			cctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
			holder, theirs, left, found, err = l.cfg.Store.Lookup(cctx)
			cancel()
			if err == nil {
				failures.Recovered(l.log, "pgledger: database reachable again")
				if seen := fmt.Sprint(holder, "/", theirs); found && seen != announced {
					announced = seen
					l.log.Info("pgledger: standing by: another process holds the lease", "lease_holder", holder, "epoch", theirs, "left", left.Round(time.Millisecond))
				}
				if found {
					wait = max(min(wait, l.untilExpiry(asked, left)), minWait)
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !l.transient(err) {
				return nil, fmt.Errorf("pgledger: campaigning for the lease of agent %q: %w", l.cfg.AgentID, err)
			}
			failures.Note(l.log, "pgledger: cannot reach the database to campaign for the lease; retrying", err)
			// No faster than a lookup may come: a tiny PollInterval
			// must not become a loop of connection attempts for as
			// long as an outage lasts.
			wait = max(wait, minWait)
		}
		if err := l.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// minWait is the shortest wait between two attempts: a standby that
// woke before the lease ran out asks again this soon at the earliest, so
// it never spins.
const minWait = time.Millisecond

// untilExpiry is how long, by the holder's clock, until a lease that the
// database said at asked had left runs out, counted so that the standby
// is never late: from before the lookup was sent (not from its answer),
// and the skew bound early (a clock running MaxClockSkew slow would wake
// that much late). Waking early costs one refused acquisition and a
// lookup; safety never rests on it, only on the database's acquire.
func (l *loop) untilExpiry(asked time.Time, left time.Duration) time.Duration {
	return left - time.Duration(float64(left)*l.cfg.MaxClockSkew) - l.clock.Now().Sub(asked)
}

// call runs one statement bounded by CallTimeout.
func (l *loop) call(ctx context.Context, stmt func(context.Context) (int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	return stmt(ctx)
}

// errLeadReturned stops the renewals once lead has returned.
var errLeadReturned = errors.New("pgledger: the leader returned")

// hold runs lead under ls, renewing it, until lead returns; lost reports
// whether the lease was lost meanwhile.
func (l *loop) hold(ctx context.Context, ls *Lease, lead func(context.Context, *Lease) error) (lost bool, err error) {
	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		l.keep(leadCtx, ls, cancel)
	}()
	l.log.Info("pgledger: lease acquired; leading", "epoch", ls.Epoch)
	err = lead(leadCtx, ls)
	// A leader that returns on its own just as the lease ran out (woken
	// from a pause to find itself superseded, say) lost it too: what it
	// returned is a symptom, and the process stands by.
	lost = errors.Is(context.Cause(leadCtx), l.cfg.Lost) || ls.Short(0) != ""
	cancel(errLeadReturned)
	<-kept
	ls.End("the leader returned")
	if !lost {
		l.release(ctx, ls)
	}
	return lost, err
}

// keep renews ls every third of LeaseTime until ctx ends, and cancels the
// leader with Lost when the lease is lost. A failed renewal is retried
// every tenth of LeaseTime while the lease lasts.
func (l *loop) keep(ctx context.Context, ls *Lease, cancel context.CancelCauseFunc) {
	every, retry := l.cfg.LeaseTime/3, l.cfg.LeaseTime/10
	timer := time.NewTimer(l.clock.Real(every))
	defer timer.Stop()
	lose := func(reason string) {
		ls.End(reason)
		l.log.Warn("pgledger: lease lost; stopping the leader", "epoch", ls.Epoch, "why", reason)
		cancel(fmt.Errorf("%w: %s", l.cfg.Lost, reason))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// After a pause (SIGSTOP, a stalled VM) this is the first thing
		// that runs: a lease that ran out meanwhile is given up at once.
		if reason := ls.Short(0); reason != "" {
			lose(reason)
			return
		}
		sent := l.clock.Now()
		renewed, err := l.renew(ctx, ls)
		switch {
		case err == nil && renewed:
			ls.Extend(sent.Add(l.heldFor()))
			if reason := ls.Short(0); reason != "" { // the answer came after a pause
				lose(reason)
				return
			}
			timer.Reset(l.clock.Real(every))
		case err == nil:
			lose("the database refused the renewal: another process took the lease over, or it ran out")
			return
		case ctx.Err() != nil:
			return
		default:
			left := ls.Left()
			l.log.Warn("pgledger: lease renewal failed; retrying while it lasts", "epoch", ls.Epoch, "left", left.Round(time.Millisecond), "err", err)
			timer.Reset(l.clock.Real(max(min(retry, left), 0)))
		}
	}
}

// renew extends the lease, the call bounded by what is left of it.
func (l *loop) renew(ctx context.Context, ls *Lease) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, min(l.cfg.CallTimeout, l.clock.Real(max(ls.Left(), 0))))
	defer cancel()
	return l.cfg.Store.Renew(ctx, ls.Epoch)
}

// release ends the lease at once, so a standby need not wait for it to
// run out. A failure only delays the takeover; it is logged.
func (l *loop) release(ctx context.Context, ls *Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CallTimeout)
	defer cancel()
	released, err := l.cfg.Store.Release(ctx, ls.Epoch)
	switch {
	case err != nil:
		l.log.Warn("pgledger: could not release the lease; a standby takes over when it runs out", "epoch", ls.Epoch, "err", err)
	case released:
		l.log.Info("pgledger: lease released", "epoch", ls.Epoch)
	}
}
