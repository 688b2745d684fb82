package boltledger

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/band-once/bandonce"
	bolt "go.etcd.io/bbolt"
)

// Prune deletes the in-room key records (KeyAccepted, KeyDuplicateDropped),
// the ack-pending records and the step results last written before cutoff,
// and returns how many it deleted. Intent records are always kept: they are the ones that
// make the shell read the room.
//
// Pruning trades the guarantee for space. A pruned key reads KeyUnknown,
// which a durable ledger's shell takes as "never tried" and posts without
// reading the room, so a message that produces a pruned key again gets a
// second reply; and a message whose ack-pending record was pruned is
// handled again if Band serves it again, and its pruned steps run again
// (with the same idempotency keys). Choose a cutoff well past the
// time any message could come back or any key be reused.
func (l *Ledger) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	removed := 0
	err := l.update(ctx, "prune", func(tx *bolt.Tx) error {
		keys, err := pruneBucket(tx.Bucket(keysBucket), cutoff, decodeRecord, func(tag byte) bool {
			return bandonce.KeyState(tag).InRoom()
		})
		if err != nil {
			return err
		}
		acks, err := pruneBucket(tx.Bucket(acksBucket), cutoff, decodeRecord, func(tag byte) bool { return tag == ackTag })
		if err != nil {
			return err
		}
		steps := 0
		if b := tx.Bucket(stepsBucket); b != nil {
			steps, err = pruneBucket(b, cutoff, decodeStepRecord, func(byte) bool { return true })
		}
		removed = keys + acks + steps
		if err == nil && removed == 0 {
			return errUnchanged
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return removed, nil
}

// pruneBucket deletes the records of b that prunable accepts and that were
// written before cutoff. It collects them first: deleting under a moving
// bbolt cursor can skip records.
func pruneBucket(b *bolt.Bucket, cutoff time.Time, decode func([]byte) (byte, time.Time, bool), prunable func(tag byte) bool) (int, error) {
	var doomed [][]byte
	err := b.ForEach(func(k, v []byte) error {
		tag, at, ok := decode(v)
		if !ok {
			return fmt.Errorf("%w: record %x", ErrCorrupt, v)
		}
		if prunable(tag) && at.Before(cutoff) {
			doomed = append(doomed, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range doomed {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// decodeStepRecord reads a step record's tag and write time for Prune.
func decodeStepRecord(v []byte) (byte, time.Time, bool) {
	_, at, ok := decodeStep(v)
	return stepTag, at, ok
}
