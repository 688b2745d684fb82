package pgledger

import (
	"context"
	"errors"
	"fmt"
	"github.com/band-once/bandonce/internal/leaderloop"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
	"github.com/jackc/pgx/v5"
)

// Ledger is a bandonce.Ledger in PostgreSQL, bound to one lease: every
// write carries the lease's epoch and is refused with a *FencedError once
// that epoch is no longer current. RunLeader hands one to the leader; it
// is safe for concurrent use.
type Ledger struct {
	store *Store
	lease *leaderloop.Lease

	reads, writes atomic.Int64
}

var _ bandonce.Ledger = (*Ledger)(nil)

// Stats counts the statements a Ledger sent, for benchmarks and metrics.
type Stats struct {
	// Reads are Key, AckPending and Step queries.
	Reads int64
	// Writes are SetKey, SetAckPending and SetStep statements, each one
	// fenced write committed on its own, durable before the call returned.
	Writes int64
}

// Stats returns the counts so far.
func (l *Ledger) Stats() Stats { return Stats{Reads: l.reads.Load(), Writes: l.writes.Load()} }

// Epoch is the lease epoch this Ledger writes under. Each acquisition of
// the agent's lease has a higher one.
func (l *Ledger) Epoch() int64 { return l.lease.Epoch }

// Durable implements bandonce.Ledger: a write that returned is committed
// in the database, whichever process made it.
func (l *Ledger) Durable() bool { return true }

// Key implements bandonce.Ledger.
func (l *Ledger) Key(ctx context.Context, room, key string) (bandonce.KeyState, error) {
	ctx, cancel := context.WithTimeout(ctx, l.store.callTimeout())
	defer cancel()
	l.reads.Add(1)
	var state int16
	err := l.store.pool.QueryRow(ctx, l.store.sql.key, l.store.opts.AgentID, room, key).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return bandonce.KeyUnknown, nil
	case err != nil:
		return bandonce.KeyUnknown, fmt.Errorf("pgledger: read key %q in room %q: %w", key, room, err)
	case !stored(bandonce.KeyState(state)):
		return bandonce.KeyUnknown, fmt.Errorf("pgledger: read key %q in room %q: the row holds state %d, not a key state", key, room, state)
	}
	return bandonce.KeyState(state), nil
}

// SetKey implements bandonce.Ledger. Every state is committed before
// SetKey returns; KeyUnknown deletes the record.
//
// KeyIntent is the lease's check before a post: it is written only while
// the lease has at least a third of LeaseTime left by the database's
// clock, and SetKey fails, post-write, if this process's own clock says
// that is no longer so when the answer comes (the process was paused
// while the write was in flight). The shell posts only after SetKey
// returned nil, so a holder that lost its lease posts nothing more.
func (l *Ledger) SetKey(ctx context.Context, room, key string, state bandonce.KeyState) error {
	if state != bandonce.KeyUnknown && !stored(state) {
		return fmt.Errorf("%w: %d", ErrInvalidState, int(state))
	}
	op, margin := "set key "+state.String(), time.Duration(0)
	if state == bandonce.KeyIntent {
		margin = l.store.intentMargin()
	}
	var err error
	if state == bandonce.KeyUnknown {
		err = l.write(ctx, op, margin, l.store.sql.deleteKey, room, key)
	} else {
		err = l.write(ctx, op, margin, l.store.sql.setKey, room, key, int16(state))
	}
	if err != nil {
		return fmt.Errorf("pgledger: %s %q in room %q: %w", op, key, room, err)
	}
	return nil
}

// AckPending implements bandonce.Ledger.
func (l *Ledger) AckPending(ctx context.Context, room, messageID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.store.callTimeout())
	defer cancel()
	l.reads.Add(1)
	var pending bool
	if err := l.store.pool.QueryRow(ctx, l.store.sql.ack, l.store.opts.AgentID, room, messageID).Scan(&pending); err != nil {
		return false, fmt.Errorf("pgledger: read ack-pending of message %q in room %q: %w", messageID, room, err)
	}
	return pending, nil
}

// SetAckPending implements bandonce.Ledger. Clearing deletes the record,
// so done messages take no room.
func (l *Ledger) SetAckPending(ctx context.Context, room, messageID string, pending bool) error {
	op, stmt := "set ack-pending", l.store.sql.setAck
	if !pending {
		op, stmt = "clear ack-pending", l.store.sql.deleteAck
	}
	if err := l.write(ctx, op, 0, stmt, room, messageID); err != nil {
		return fmt.Errorf("pgledger: %s of message %q in room %q: %w", op, messageID, room, err)
	}
	return nil
}

// Step implements bandonce.Ledger.
func (l *Ledger) Step(ctx context.Context, room, messageID, name string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.store.callTimeout())
	defer cancel()
	l.reads.Add(1)
	var result []byte
	err := l.store.pool.QueryRow(ctx, l.store.sql.step, l.store.opts.AgentID, room, messageID, name).Scan(&result)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("pgledger: read step %q of message %q in room %q: %w", name, messageID, room, err)
	}
	return result, true, nil
}

// SetStep implements bandonce.Ledger: the result is committed before
// SetStep returns. A holder that lost its lease records nothing; the next
// holder runs the step again, with the same idempotency key.
func (l *Ledger) SetStep(ctx context.Context, room, messageID, name string, result []byte) error {
	if result == nil {
		result = []byte{} // a step that returned nothing still ran
	}
	if err := l.write(ctx, "set step", 0, l.store.sql.setStep, room, messageID, name, result); err != nil {
		return fmt.Errorf("pgledger: set step %q of message %q in room %q: %w", name, messageID, room, err)
	}
	return nil
}

// write runs one fenced statement (see statements) whose own parameters
// follow the fence's three, and refuses, before and after, when this
// process's view of the lease leaves less than margin.
func (l *Ledger) write(ctx context.Context, op string, margin time.Duration, stmt string, args ...any) error {
	if reason := l.lease.Short(margin); reason != "" {
		return l.fenced(op, reason)
	}
	ctx, cancel := context.WithTimeout(ctx, l.store.callTimeout())
	defer cancel()
	l.writes.Add(1)
	held := false
	err := l.store.pool.QueryRow(ctx, stmt, append([]any{l.store.opts.AgentID, l.lease.Epoch, margin.Microseconds()}, args...)...).Scan(&held)
	if err != nil {
		return err
	}
	if !held {
		return l.fenced(op, l.store.whyFenced(ctx, l.lease.Epoch, margin))
	}
	if reason := l.lease.Short(margin); reason != "" {
		return l.fenced(op, reason+" (the write was committed; a later holder treats it as an intent and reads the room)")
	}
	return nil
}

func (l *Ledger) fenced(op, reason string) error {
	return &FencedError{AgentID: l.store.opts.AgentID, Epoch: l.lease.Epoch, Op: op, Reason: reason}
}

// stored reports whether a key record may hold s: KeyUnknown is the
// absence of a record.
func stored(s bandonce.KeyState) bool {
	switch s {
	case bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped:
		return true
	}
	return false
}

// Prune deletes the agent's in-room key records (KeyAccepted,
// KeyDuplicateDropped), ack-pending records and step results written
// before cutoff, by the database's clock, and returns how many it deleted.
// Intent records are always kept. It needs no lease: it only forgets.
//
// Pruning trades the guarantee for space, as boltledger's Prune does: a
// pruned key reads KeyUnknown, which the shell takes as "never tried", so
// a message that produces it again gets a second reply; a message whose
// ack-pending record or steps were pruned is handled again, its steps run
// again (with the same idempotency keys), if Band serves it again. Choose
// a cutoff well past the time any message could come back or any key be
// reused.
//
// It deletes in batches, each a statement of its own bounded by the call
// timeout, until none is left or ctx ends; what earlier batches deleted
// stays deleted, and is counted, even when a later one fails.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		n, more, err := s.pruneBatch(ctx, cutoff)
		total += n
		if err != nil {
			return total, fmt.Errorf("pgledger: prune the ledger of agent %q: %w", s.opts.AgentID, err)
		}
		if !more {
			return total, nil
		}
	}
}

// pruneBatchRows is the most rows a Prune statement deletes from each
// table (a variable, so that tests can make batches small).
var pruneBatchRows int64 = 10000

// pruneBatch deletes one batch; more reports whether a table may hold more.
func (s *Store) pruneBatch(ctx context.Context, cutoff time.Time) (n int64, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	var k, a, st int64
	if err := s.pool.QueryRow(ctx, s.sql.prune, s.opts.AgentID, cutoff, pruneBatchRows).Scan(&k, &a, &st); err != nil {
		return 0, false, err
	}
	return k + a + st, k == pruneBatchRows || a == pruneBatchRows || st == pruneBatchRows, nil
}

// callTimeout bounds every statement, so a database that stopped
// answering (a partition drops packets without a reset) fails the call
// instead of hanging it.
func (s *Store) callTimeout() time.Duration { return max(s.opts.LeaseTime/2, time.Second) }

// intentMargin is how much of the lease an intent needs left.
func (s *Store) intentMargin() time.Duration { return s.opts.LeaseTime / 3 }
