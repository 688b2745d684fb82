package boltledger

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Ledger is a bandonce.Ledger kept in a bbolt file. It is safe for
// concurrent use; bbolt runs one write at a time and reads alongside.
type Ledger struct {
	db       *bolt.DB
	path     string
	pageSize int64
	now      func() time.Time // when records are written; tests replace it

	syncs        atomic.Int64
	bytesWritten atomic.Int64
}

var _ bandonce.Ledger = (*Ledger)(nil)

// Stats counts what a Ledger wrote since Open, for benchmarks and metrics.
type Stats struct {
	// Syncs is the number of committed writes. Each was durable before
	// its call returned: bbolt fdatasyncs the pages, then the meta page.
	Syncs int64
	// BytesWritten is what those commits wrote: their changed pages
	// (the freelist included) and one meta page each.
	BytesWritten int64
}

// Stats returns the counts so far.
func (l *Ledger) Stats() Stats {
	return Stats{Syncs: l.syncs.Load(), BytesWritten: l.bytesWritten.Load()}
}

// Close releases the file and its lock. Calls after Close fail with
// ErrClosed; a second Close does nothing.
func (l *Ledger) Close() error {
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("boltledger: close %s: %w", l.path, err)
	}
	return nil
}

// Durable implements bandonce.Ledger: records survive a crash.
func (l *Ledger) Durable() bool { return true }

// Key implements bandonce.Ledger.
func (l *Ledger) Key(ctx context.Context, room, key string) (bandonce.KeyState, error) {
	state := bandonce.KeyUnknown
	err := l.view(ctx, "read key", func(tx *bolt.Tx) error {
		v := tx.Bucket(keysBucket).Get(recordKey(room, key))
		if v == nil {
			return nil
		}
		tag, _, ok := decodeRecord(v)
		if !ok || !storedState(tag) {
			return fmt.Errorf("%w: key record %x in room %q", ErrCorrupt, v, room)
		}
		state = bandonce.KeyState(tag)
		return nil
	})
	if err != nil {
		return bandonce.KeyUnknown, err
	}
	return state, nil
}

// SetKey implements bandonce.Ledger. Every state is committed and synced
// before SetKey returns, KeyIntent above all. KeyUnknown deletes the record.
func (l *Ledger) SetKey(ctx context.Context, room, key string, state bandonce.KeyState) error {
	if state != bandonce.KeyUnknown && (state < 0 || state > 255 || !storedState(byte(state))) {
		return fmt.Errorf("%w: %d", ErrInvalidState, int(state))
	}
	id := recordKey(room, key)
	return l.update(ctx, "set key", func(tx *bolt.Tx) error {
		keys := tx.Bucket(keysBucket)
		if state == bandonce.KeyUnknown {
			return deleteIfPresent(keys, id)
		}
		return keys.Put(id, encodeRecord(byte(state), l.now()))
	})
}

// AckPending implements bandonce.Ledger.
func (l *Ledger) AckPending(ctx context.Context, room, messageID string) (bool, error) {
	pending := false
	err := l.view(ctx, "read ack-pending", func(tx *bolt.Tx) error {
		v := tx.Bucket(acksBucket).Get(recordKey(room, messageID))
		if v == nil {
			return nil
		}
		if tag, _, ok := decodeRecord(v); !ok || tag != ackTag {
			return fmt.Errorf("%w: ack-pending record %x in room %q", ErrCorrupt, v, room)
		}
		pending = true
		return nil
	})
	return pending, err
}

// SetAckPending implements bandonce.Ledger. Clearing deletes the record,
// so done messages take no room.
func (l *Ledger) SetAckPending(ctx context.Context, room, messageID string, pending bool) error {
	id := recordKey(room, messageID)
	return l.update(ctx, "set ack-pending", func(tx *bolt.Tx) error {
		acks := tx.Bucket(acksBucket)
		if !pending {
			return deleteIfPresent(acks, id)
		}
		return acks.Put(id, encodeRecord(ackTag, l.now()))
	})
}

// errUnchanged rolls back a write that found nothing to do, which spares
// a commit and its syncs.
var errUnchanged = errors.New("nothing to change")

func deleteIfPresent(b *bolt.Bucket, id []byte) error {
	if b.Get(id) == nil {
		return errUnchanged
	}
	return b.Delete(id)
}

// update runs fn in a write transaction and counts the commit.
func (l *Ledger) update(ctx context.Context, op string, fn func(*bolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltledger: %s: %w", op, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer l.recoverFault(op, &err)
	var committed *bolt.Tx
	err = l.db.Update(func(tx *bolt.Tx) error {
		committed = tx
		return fn(tx)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return l.wrap(op, err)
	}
	l.syncs.Add(1)
	stats := committed.Stats()
	l.bytesWritten.Add(stats.GetPageAlloc() + l.pageSize)
	return nil
}

// view runs fn in a read transaction.
func (l *Ledger) view(ctx context.Context, op string, fn func(*bolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltledger: %s: %w", op, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer l.recoverFault(op, &err)
	if err := l.db.View(fn); err != nil {
		return l.wrap(op, err)
	}
	return nil
}

func (l *Ledger) wrap(op string, err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	return fmt.Errorf("boltledger: %s in %s: %w", op, l.path, err)
}

// recoverFault turns a panic or memory fault inside bbolt, which a damaged
// file can cause, into ErrCorrupt. bbolt rolls the transaction back as
// the panic passes, so the Ledger stays usable for intact pages.
func (l *Ledger) recoverFault(op string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("boltledger: %s in %s: %w: %w", op, l.path, ErrCorrupt, &faultError{value: r})
	}
}
