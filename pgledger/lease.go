package pgledger

import (
	"context"
	"errors"
	"fmt"
	"github.com/band-once/bandonce/internal/leaderloop"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunLeader runs lead while this process holds the agent's lease, and
// waits as a hot standby while another process does. Call it from every
// replica of the agent, on any number of machines, with the same database:
// at most one of them runs lead at a time, with a Ledger whose writes are
// fenced by the lease.
//
// A standby asks every PollInterval and, once the lease it saw has less
// than a poll left, again when it runs out as the database said (counted
// from before it asked, MaxClockSkew early, so never late; at least a
// millisecond apart), and takes the lease when it is free, has run out,
// or names this process's Holder (the answer to its own acquisition was
// lost).
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
	return leaderloop.Run(ctx, s.leaderConfig(), func(ctx context.Context, ls *leaderloop.Lease) error {
		return lead(ctx, &Ledger{store: s, lease: ls})
	})
}

// leaderConfig is RunLeader's loop over this Store's lease statements.
func (s *Store) leaderConfig() leaderloop.Config {
	return leaderloop.Config{
		AgentID: s.opts.AgentID, Store: leaseStatements{s}, LeaseTime: s.opts.LeaseTime,
		PollInterval: s.opts.PollInterval, CallTimeout: s.callTimeout(), MaxClockSkew: MaxClockSkew,
		Transient: transient, Lost: ErrLeaseLost, Log: s.log,
	}
}

// leaseStatements is the leader loop's Store: the lease's SQL, for this
// Store's agent and holder.
type leaseStatements struct{ s *Store }

func (l leaseStatements) Acquire(ctx context.Context) (int64, error) {
	var epoch int64
	err := l.s.pool.QueryRow(ctx, l.s.sql.acquire, l.s.opts.AgentID, l.s.opts.Holder, l.s.opts.LeaseTime.Microseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return epoch, err
}

func (l leaseStatements) Lookup(ctx context.Context) (holder string, epoch int64, left time.Duration, found bool, err error) {
	holder, epoch, left, err = l.s.lookup(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, 0, false, nil
	}
	return holder, epoch, left, err == nil, err
}

func (l leaseStatements) Renew(ctx context.Context, epoch int64) (bool, error) {
	tag, err := l.s.pool.Exec(ctx, l.s.sql.renew, l.s.opts.AgentID, epoch, l.s.opts.LeaseTime.Microseconds())
	return err == nil && tag.RowsAffected() == 1, err
}

func (l leaseStatements) Release(ctx context.Context, epoch int64) (bool, error) {
	tag, err := l.s.pool.Exec(ctx, l.s.sql.release, l.s.opts.AgentID, epoch)
	return err == nil && tag.RowsAffected() == 1, err
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

// MaxClockSkew is the bound on how far a host's clock may run slow or
// fast against the database's that the lease allows for: 1%. The
// database decides when a lease runs out, by its own clock; the holder
// stops writing and sending when its lease runs out by the host's clock,
// so it counts the lease a hundredth shorter than the database does: a
// holder whose clock runs up to 1% slow still stops before a standby
// can take over.
const MaxClockSkew = 0.01

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
