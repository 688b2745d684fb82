package boltledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/band-once/bandonce"
)

// deadLettersBucket holds the messages the shell gave up on
// (bandonce.DeadLetterLedger), one JSON record per room and message id.
// A ledger created before dead letters were kept lacks it; the first
// AddDeadLetter creates it. Prune leaves it alone: a dead letter waits for
// an operator, however old it is.
var deadLettersBucket = []byte("deadletters")

// deadLetterRecord is a dead letter as stored; Err is not kept.
type deadLetterRecord struct {
	RoomID     string    `json:"room_id"`
	MessageID  string    `json:"message_id"`
	SenderID   string    `json:"sender_id,omitempty"`
	SenderName string    `json:"sender_name,omitempty"`
	SenderType string    `json:"sender_type,omitempty"`
	Content    string    `json:"content"`
	Failures   int       `json:"failures"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
}

// AddDeadLetter implements bandonce.DeadLetterLedger. The record is
// committed and synced before it returns.
func (l *Ledger) AddDeadLetter(ctx context.Context, d bandonce.DeadLetter) error {
	v, err := json.Marshal(deadLetterRecord{
		RoomID: d.RoomID, MessageID: d.MessageID, SenderID: d.SenderID, SenderName: d.SenderName, SenderType: d.SenderType,
		Content: d.Content, Failures: d.Failures, Reason: d.Reason, At: d.At,
	})
	if err != nil {
		return err
	}
	return l.update(ctx, "add dead letter", func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(deadLettersBucket)
		if err != nil {
			return err
		}
		return b.Put(recordKey(d.RoomID, d.MessageID), v)
	})
}

// DeadLetters implements bandonce.DeadLetterLedger.
func (l *Ledger) DeadLetters(ctx context.Context) ([]bandonce.DeadLetter, error) {
	var out []bandonce.DeadLetter
	err := l.view(ctx, "list dead letters", func(tx *bolt.Tx) error {
		b := tx.Bucket(deadLettersBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r deadLetterRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("%w: dead letter record %x: %v", ErrCorrupt, k, err)
			}
			out = append(out, bandonce.DeadLetter{
				RoomID: r.RoomID, MessageID: r.MessageID, SenderID: r.SenderID, SenderName: r.SenderName, SenderType: r.SenderType,
				Content: r.Content, Failures: r.Failures, Reason: r.Reason, At: r.At,
			})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b bandonce.DeadLetter) int { return a.At.Compare(b.At) })
	return out, nil
}

// RemoveDeadLetter implements bandonce.DeadLetterLedger.
func (l *Ledger) RemoveDeadLetter(ctx context.Context, room, messageID string) error {
	return l.update(ctx, "remove dead letter", func(tx *bolt.Tx) error {
		b := tx.Bucket(deadLettersBucket)
		if b == nil {
			return errUnchanged
		}
		return deleteIfPresent(b, recordKey(room, messageID))
	})
}
