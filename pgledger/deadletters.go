package pgledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/band-once/bandonce"
)

// The dead-letter statements. $1 agent; the writes are fenced like every
// other (see statements), their own parameters from $4.
const (
	// $4 room, $5 message, $6 sender id, $7 sender name, $8 sender type,
	// $9 content, $10 failures, $11 reason, $12 when.
	addDeadLetterSQL = `INSERT INTO {s}.deadletters
			(agent_id, room, message_id, sender_id, sender_name, sender_type, content, failures, reason, given_up_at, epoch)
		SELECT $1, $4, $5, $6, $7, $8, $9, $10, $11, $12, $2 FROM fence
		ON CONFLICT (agent_id, room, message_id) DO UPDATE
		SET sender_id = excluded.sender_id, sender_name = excluded.sender_name, sender_type = excluded.sender_type,
			content = excluded.content, failures = excluded.failures, reason = excluded.reason,
			given_up_at = excluded.given_up_at, epoch = excluded.epoch`
	// $4 room, $5 message.
	removeDeadLetterSQL = `DELETE FROM {s}.deadletters
		WHERE agent_id = $1 AND room = $4 AND message_id = $5 AND EXISTS (SELECT 1 FROM fence)`
	listDeadLettersSQL = `SELECT room, message_id, sender_id, sender_name, sender_type, content, failures, reason, given_up_at
		FROM {s}.deadletters WHERE agent_id = $1 ORDER BY given_up_at, room, message_id`
)

func (l *Ledger) deadLetterSQL(text string) string {
	return strings.ReplaceAll(text, "{s}", l.store.schema)
}

// AddDeadLetter implements bandonce.DeadLetterLedger: the record is
// committed before it returns, by the lease's holder only.
func (l *Ledger) AddDeadLetter(ctx context.Context, d bandonce.DeadLetter) error {
	err := l.write(ctx, "add dead letter", 0, l.deadLetterSQL(fenced(addDeadLetterSQL)),
		d.RoomID, d.MessageID, d.SenderID, storable(d.SenderName), d.SenderType, storable(d.Content), d.Failures, storable(d.Reason), d.At.UTC())
	if err != nil {
		return fmt.Errorf("pgledger: add dead letter of message %q in room %q: %w", d.MessageID, d.RoomID, err)
	}
	return nil
}

// RemoveDeadLetter implements bandonce.DeadLetterLedger.
func (l *Ledger) RemoveDeadLetter(ctx context.Context, room, messageID string) error {
	if err := l.write(ctx, "remove dead letter", 0, l.deadLetterSQL(fenced(removeDeadLetterSQL)), room, messageID); err != nil {
		return fmt.Errorf("pgledger: remove dead letter of message %q in room %q: %w", messageID, room, err)
	}
	return nil
}

// DeadLetters implements bandonce.DeadLetterLedger. Anyone with the
// Store may read them; no lease is needed.
func (l *Ledger) DeadLetters(ctx context.Context) ([]bandonce.DeadLetter, error) {
	ctx, cancel := context.WithTimeout(ctx, l.store.callTimeout())
	defer cancel()
	l.reads.Add(1)
	rows, err := l.store.pool.Query(ctx, l.deadLetterSQL(listDeadLettersSQL), l.store.opts.AgentID)
	if err != nil {
		return nil, fmt.Errorf("pgledger: list dead letters: %w", err)
	}
	defer rows.Close()
	var out []bandonce.DeadLetter
	for rows.Next() {
		var d bandonce.DeadLetter
		var at time.Time
		if err := rows.Scan(&d.RoomID, &d.MessageID, &d.SenderID, &d.SenderName, &d.SenderType, &d.Content, &d.Failures, &d.Reason, &at); err != nil {
			return nil, fmt.Errorf("pgledger: list dead letters: %w", err)
		}
		d.At = at.UTC()
		d.SenderName, d.Content, d.Reason = unstorable(d.SenderName), unstorable(d.Content), unstorable(d.Reason)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgledger: list dead letters: %w", err)
	}
	return out, nil
}

// A dead letter's free text (a message's content, a sender's name, the
// reason) is whatever a room member wrote, and may hold a NUL byte, which
// PostgreSQL's text cannot: stored raw, the record would be refused and
// the dead letter lost. storable escapes it reversibly with U+FFFE, a
// noncharacter no text carries: U+FFFE itself becomes two of them, a NUL
// U+FFFE and '0'. unstorable undoes it.
const textEscape = "\uFFFE"

func storable(s string) string {
	// Nor can it hold bytes that are not UTF-8 (an error's text quoting a
	// dependency's raw answer, say): they become U+FFFD, as Band's JSON
	// would make them, rather than the whole record being refused.
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsRune(s, 0) && !strings.Contains(s, textEscape) {
		return s
	}
	return strings.NewReplacer(textEscape, textEscape+textEscape, "\x00", textEscape+"0").Replace(s)
}

func unstorable(s string) string {
	if !strings.Contains(s, textEscape) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, textEscape)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+len(textEscape):]
		switch {
		case strings.HasPrefix(s, textEscape):
			b.WriteString(textEscape)
			s = s[len(textEscape):]
		case strings.HasPrefix(s, "0"):
			b.WriteByte(0)
			s = s[1:]
		default: // not written by storable: kept as it is
			b.WriteString(textEscape)
		}
	}
}
