package boltledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// stepsBucket holds the results of journaled steps. A ledger created
// before steps existed lacks it; the first SetStep creates it, and a read
// finds no record until then.
var stepsBucket = []byte("steps")

// stepTag marks a step record: the tag, the write time (as every record
// has, for Prune), then the result's bytes.
const stepTag = 1

// stepKey names one step of one message in a room: the message id's
// length as a uvarint, the id, then the step's name, below the room's
// prefix, so that no two (message, name) pairs share bytes.
func stepKey(room, messageID, name string) []byte {
	id := make([]byte, 0, binary.MaxVarintLen64+len(messageID)+len(name))
	id = binary.AppendUvarint(id, uint64(len(messageID)))
	id = append(id, messageID...)
	id = append(id, name...)
	return recordKey(room, string(id))
}

func encodeStep(result []byte, at time.Time) []byte {
	v := make([]byte, recordLen, recordLen+len(result))
	v[0] = stepTag
	binary.BigEndian.PutUint64(v[1:], uint64(at.UnixNano()))
	return append(v, result...)
}

// decodeStep reads a step record; ok is false when it is too short or not
// tagged as one.
func decodeStep(v []byte) (result []byte, at time.Time, ok bool) {
	if len(v) < recordLen || v[0] != stepTag {
		return nil, time.Time{}, false
	}
	return v[recordLen:], time.Unix(0, int64(binary.BigEndian.Uint64(v[1:recordLen]))), true
}

// Step implements bandonce.Ledger.
func (l *Ledger) Step(ctx context.Context, room, messageID, name string) ([]byte, bool, error) {
	var result []byte
	found := false
	err := l.view(ctx, "read step", func(tx *bolt.Tx) error {
		steps := tx.Bucket(stepsBucket)
		if steps == nil {
			return nil
		}
		v := steps.Get(stepKey(room, messageID, name))
		if v == nil {
			return nil
		}
		r, _, ok := decodeStep(v)
		if !ok {
			return fmt.Errorf("%w: step record %x in room %q", ErrCorrupt, v, room)
		}
		// bbolt's bytes are valid only inside the transaction.
		result, found = bytes.Clone(r), true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return result, found, nil
}

// SetStep implements bandonce.Ledger. The record is committed and synced
// before SetStep returns.
func (l *Ledger) SetStep(ctx context.Context, room, messageID, name string, result []byte) error {
	id := stepKey(room, messageID, name)
	return l.update(ctx, "set step", func(tx *bolt.Tx) error {
		steps, err := tx.CreateBucketIfNotExists(stepsBucket)
		if err != nil {
			return err
		}
		return steps.Put(id, encodeStep(result, l.now()))
	})
}
