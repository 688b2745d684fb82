package bandonce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// DeadLetterLedger is a Ledger that also keeps the messages the shell gave
// up on, so that an operator can list them and replay them once the cause
// is fixed ([Shell.DeadLetters], [Shell.Replay], and bandonce deadletters).
// MemoryLedger, boltledger and pgledger implement it; with a ledger that
// does not, dead letters are only logged and reported to Hooks.DeadLetter.
//
// The shell records a dead letter after Band marked it failed and before
// it tells the room and consumes the message, so a crash in between
// loses no record.
type DeadLetterLedger interface {
	Ledger
	// AddDeadLetter records d under its room and message id, replacing
	// any earlier record of the same message. The record must be durable,
	// if the ledger is, before it returns. d.Err is not kept.
	AddDeadLetter(ctx context.Context, d DeadLetter) error
	// DeadLetters lists the recorded dead letters, oldest (At) first,
	// their Err nil and their At kept to the microsecond at least.
	DeadLetters(ctx context.Context) ([]DeadLetter, error)
	// RemoveDeadLetter forgets the record of a message; forgetting one
	// that is not there is no error.
	RemoveDeadLetter(ctx context.Context, room, messageID string) error
}

// MaxMemoryDeadLetters bounds the dead letters a MemoryLedger keeps; the
// oldest is forgotten first.
const MaxMemoryDeadLetters = 1000

// AddDeadLetter implements DeadLetterLedger.
func (l *MemoryLedger) AddDeadLetter(_ context.Context, d DeadLetter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.Err = nil
	l.dead = slices.DeleteFunc(l.dead, func(o DeadLetter) bool { return o.RoomID == d.RoomID && o.MessageID == d.MessageID })
	l.dead = append(l.dead, d)
	if n := len(l.dead) - MaxMemoryDeadLetters; n > 0 {
		l.dead = slices.Delete(l.dead, 0, n)
	}
	return nil
}

// DeadLetters implements DeadLetterLedger.
func (l *MemoryLedger) DeadLetters(context.Context) ([]DeadLetter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.dead)
	slices.SortStableFunc(out, func(a, b DeadLetter) int { return a.At.Compare(b.At) })
	return out, nil
}

// RemoveDeadLetter implements DeadLetterLedger.
func (l *MemoryLedger) RemoveDeadLetter(_ context.Context, room, messageID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead = slices.DeleteFunc(l.dead, func(o DeadLetter) bool { return o.RoomID == room && o.MessageID == messageID })
	return nil
}

// keepDeadLetter records d in the ledger, if it keeps dead letters.
func (r *room) keepDeadLetter(ctx context.Context, d DeadLetter) {
	dl, ok := r.s.cfg.Ledger.(DeadLetterLedger)
	if !ok || errors.Is(d.Err, errDeadLetteredBefore) {
		// (The life that began it recorded it before telling the room.)
		return
	}
	if err := dl.AddDeadLetter(ctx, d); err != nil {
		r.s.ledgerFailed("bandonce: ledger write failed; the dead letter is not kept", err, "room", r.id, "message", d.MessageID)
	}
}

// ErrNoDeadLetters is returned by DeadLetters and Replay when the Config's
// Ledger keeps no dead letters (it is not a DeadLetterLedger).
var ErrNoDeadLetters = errors.New("bandonce: the ledger keeps no dead letters")

// ErrNotDeadLettered is returned by Replay for a message the ledger holds
// no dead letter of: never given up on, or replayed already.
var ErrNotDeadLettered = errors.New("bandonce: no such dead letter")

// DeadLetters lists the dead letters the Config's Ledger keeps, oldest
// first. It makes no request to Band.
func (s *Shell) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	dl, ok := s.cfg.Ledger.(DeadLetterLedger)
	if !ok {
		return nil, ErrNoDeadLetters
	}
	return dl.DeadLetters(ctx)
}

// Replay runs the Handler again for a dead-lettered message and posts its
// reply under the message's own dedup key, behind the same guard as a
// delivery: a replay after a crash, or a second one, answers once. The
// dead letter is forgotten once its reply is in the room (or the handler
// returned none); a handler that fails again leaves it kept, and Replay
// returns the failure.
//
// A replay is not a delivery. Band has consumed the message already, so
// there is no /next, no processing or processed mark, no attempt number
// from Band (Message.Attempt is the failures so far plus one), no retry
// and no backoff: the operator asked for this one run. No control signal
// reaches it (ctx is its only cancellation), and the room was told of the
// dead letter earlier: the answer follows that error event. Effects and
// Steps of the turn are guarded and journaled as in a delivery. Replay
// may run while Run serves the same agent; the guard keeps one answer.
// Replays of one Shell run one at a time (a second waits for the first,
// or for ctx): two at once would both pass the guard before either's
// intent was recorded, and both post.
func (s *Shell) Replay(ctx context.Context, roomID, messageID string) (Outcome, error) {
	dl, ok := s.cfg.Ledger.(DeadLetterLedger)
	if !ok {
		return Outcome{}, ErrNoDeadLetters
	}
	select {
	case s.replaying <- struct{}{}:
		defer func() { <-s.replaying }()
	case <-ctx.Done():
		return Outcome{}, context.Cause(ctx)
	}
	all, err := dl.DeadLetters(ctx)
	if err != nil {
		return Outcome{}, err
	}
	i := slices.IndexFunc(all, func(d DeadLetter) bool { return d.RoomID == roomID && d.MessageID == messageID })
	if i < 0 {
		return Outcome{}, fmt.Errorf("%w: message %s in room %s", ErrNotDeadLettered, messageID, roomID)
	}
	d := all[i]
	if s.agentID() == "" {
		if _, err := s.identify(ctx, s.startClient()); err != nil {
			return Outcome{}, err
		}
	}
	s.late.beginOnce(time.Now())
	r := newReplayRoom(s, roomID)
	o := Outcome{RoomID: roomID, MessageID: messageID, Attempt: d.Failures + 1}
	wm := &wire.Message{ID: d.MessageID, Content: d.Content, SenderID: d.SenderID, SenderName: d.SenderName, SenderType: d.SenderType}
	cy, _ := r.ctl.begin()
	t := r.newTurn(ctx, cy, d.MessageID, o.Attempt)
	reply, err := r.runHandler(ctx, wm, t)
	t.close()
	if err == nil && reply != nil {
		reply = withSender(reply, d.SenderID)
		err = validateReply(reply, s.cfg.MaxResponseBytes)
	}
	if err != nil {
		s.log.Warn("bandonce: replay failed; the dead letter is kept", "room", roomID, "message", messageID, "err", err)
		return Outcome{}, fmt.Errorf("bandonce: replay of message %s: %w", messageID, err)
	}
	o.Kind = NoReply
	if reply != nil {
		key := reply.DedupKey
		if key == "" {
			key = DefaultKey(messageID)
		}
		o.DedupKey = key
		// Not the default key's fast path: a replay is never the first
		// attempt, and a crashed replay may have posted already. A replay
		// whose intent an earlier process recorded treats that process's
		// send as unknown until the settle window has passed since this
		// one began, as a new life does for a message it inherits.
		state, err := s.cfg.Ledger.Key(ctx, roomID, key)
		if err != nil {
			return Outcome{}, fmt.Errorf("bandonce: replay of message %s: %w", messageID, err)
		}
		e := effect{key: key, reply: reply, msg: messageID, inherited: state == KeyIntent}
		dup, f := r.send(ctx, o.Attempt, e, func(bool) error { return nil })
		for f != nil && f.kind == failSettle {
			// An earlier send of this reply may still land: wait until it
			// has settled, then the guard reads the room.
			s.log.Info("bandonce: replay waits for an earlier send to settle", "room", roomID, "message", messageID, "until", f.until)
			if err := sleep(ctx, time.Until(f.until)); err != nil {
				return Outcome{}, fmt.Errorf("bandonce: replay of message %s: waiting for an earlier send to settle: %w", messageID, err)
			}
			dup, f = r.send(ctx, o.Attempt, e, func(bool) error { return nil })
		}
		if f != nil {
			return Outcome{}, fmt.Errorf("bandonce: replay of message %s: %s: %w", messageID, f.call, f.err)
		}
		o.Kind = Replied
		if dup {
			o.Kind = DuplicateDropped
		}
	}
	if err := dl.RemoveDeadLetter(ctx, roomID, messageID); err != nil {
		return o, fmt.Errorf("bandonce: replay of message %s: answered, but the dead letter is still recorded: %w", messageID, err)
	}
	s.log.Info("bandonce: dead letter replayed", "room", roomID, "message", messageID, "outcome", o.Kind.String())
	return o, nil
}

// newReplayRoom is a room for one replay: no scheduler, no fetching.
func newReplayRoom(s *Shell, id string) *room {
	r := &room{s: s, id: id, jitter: roomJitter(s.jitterSeed, id), failures: map[string]*failure{}, unsent: map[string]*Reply{}, consumeOnServe: map[string]bool{},
		deadLettering: map[string]error{}, silenced: map[string]bool{}}
	r.ctl = newRoomControl(func() {}, func() {})
	return r
}

// deadLetterAt is when a dead letter recorded now is stamped.
func deadLetterAt() time.Time { return time.Now().UTC() }
