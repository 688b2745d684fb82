package bandonce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// DeadLetter is a message the shell gave up on: its handler failed
// Config.MaxAttempts times, or once with a [Permanent] error. Band has it
// consumed; the room was told with an error event (see
// Config.DeadLetterNotice), which is given it.
type DeadLetter struct {
	RoomID     string
	MessageID  string
	SenderID   string
	SenderName string
	SenderType string
	// Content is the message's content as Band gave it, mentions
	// included; Body strips them.
	Content string
	// Failures is how many handler failures it took.
	Failures int
	// Reason is the reason it was marked failed with, the last failure's
	// text.
	Reason string
	// Err is the last failure; nil for a dead letter read back from a
	// ledger.
	Err error
	// At is when it was given up on.
	At time.Time
}

// Body is the message's text without its mentions.
func (d DeadLetter) Body() string { return StripMentions(d.Content) }

// NoticeKey is the dedup key of the error event that tells a message's
// room it was dead-lettered: "msg:<message id>:dead-letter". The event is
// posted at most once per room under it, like a reply.
func NoticeKey(messageID string) string { return DefaultKey(messageID) + ":dead-letter" }

// DefaultDeadLetterNotice is the text of the error event posted when a
// message is dead-lettered and Config.DeadLetterNotice is nil. It says in
// plain words that the agent could not answer and what kind of failure
// stopped it, never the error's own text, which may quote a URL, a token
// or a customer's data.
func DefaultDeadLetterNotice(d DeadLetter) string {
	tries := "once"
	if d.Failures > 1 {
		tries = fmt.Sprintf("%d times", d.Failures)
	}
	return fmt.Sprintf("Sorry, I could not answer this message: %s. I tried %s and have stopped trying.",
		failureKind(d.Err), tries)
}

// failureKind names the kind of failure err is, in words for a person.
func failureKind(err error) string {
	var (
		panicked *PanicError
		perm     *PermanentError
		apiErr   *APIError
		netErr   net.Error
		tooLarge *ReplyTooLargeError
	)
	switch {
	case err == nil:
		return "my work kept failing"
	case errors.As(err, &panicked):
		return "I hit an internal error"
	case errors.As(err, &tooLarge) || (errors.As(err, &apiErr) && apiErr.Status == 413):
		return "my answer was too long to post"
	case errors.As(err, &apiErr) && strings.HasPrefix(apiErr.Endpoint, "POST /agent/chats/{id}/messages"):
		return "Band refused my answer"
	case retryAfterOf(err) > 0 || (errors.As(err, &apiErr) && apiErr.Status == 429):
		return "a service I depend on is over its rate limit"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timed out"):
		return "the work took longer than I am allowed"
	case errors.As(err, &netErr):
		return "a service I depend on could not be reached"
	case errors.As(err, &perm):
		return "the request cannot be done as it stands"
	default:
		return "a service I depend on kept failing"
	}
}

// tellRoom posts the error event that tells the room a message was
// dead-lettered, behind the guard under NoticeKey, unless the Config
// turns it off. It reports whether the message may now be consumed: false
// when the event may still be owed (nothing sent, or the outcome unknown),
// and then the message is left failed so that its next delivery tells the
// room again, behind the same guard.
func (r *room) tellRoom(ctx context.Context, m *wire.Message, attempt int, d DeadLetter) (roundEnd, bool) {
	text := DefaultDeadLetterNotice(d)
	if f := r.s.cfg.DeadLetterNotice; f != nil {
		text = f(d)
	}
	if lifecycle.Blank(text) {
		return 0, true
	}
	text = r.s.cfg.apiKey.Scrub(text)
	ev := &Event{Type: EventError, Content: truncateRunes(text, maxEventContent),
		Metadata: map[string]any{"message_id": m.ID, "failures": d.Failures}}
	// msg and inherited as for the reply: an earlier life's notice may
	// still land, and this life's, if its outcome is unknown, holds the
	// message open until it has settled.
	_, f := r.send(ctx, attempt, effect{key: NoticeKey(m.ID), defaultKey: true, event: ev, msg: m.ID, inherited: r.inherited(m.ID)}, func(bool) error {
		if r.ctl.isStopped() {
			return ErrStopped
		}
		return nil
	})
	if f == nil {
		return 0, true
	}
	switch f.kind {
	case failRefused:
		// Band will never take it: the message is consumed all the same.
		r.s.log.Warn("bandonce: Band refused the dead-letter notice", "room", r.id, "message", m.ID, "err", f.err)
		return 0, true
	case failAborted, failStopped:
		return endStopped, false
	case failLater, failWait:
		return endBackoff, false
	case failSettle:
		// An earlier notice may still land: the message, failed, is
		// served again once it has settled, and tells the room then.
		r.settleUntil = f.until
		return endSettle, false
	default:
		return r.failed(f.call, f.err), false
	}
}

// isStopped reports whether the room is stopped.
func (c *roomControl) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// truncateRunes cuts s to at most n characters.
func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// deadLetterName names the ledger's record that message id's dead letter
// has begun.
func deadLetterName(id string) string { return lifecycle.RecordName("dead-letter", id) }

// deadLetterBegun reports whether the ledger records message id's dead
// letter as begun by an earlier life: its own record, or the room's
// notice of it under the notice's event name, or under its bare key,
// where versions before events were named apart recorded it.
func (r *room) deadLetterBegun(ctx context.Context, id string) (bool, error) {
	for _, name := range []string{deadLetterName(id), eventName(NoticeKey(id)), NoticeKey(id)} {
		state, err := r.s.cfg.Ledger.Key(ctx, r.id, name)
		if err != nil {
			// Not knowing is not "no record": answering a message an
			// earlier life gave up on would answer after the room was told.
			return false, err
		}
		if state != KeyUnknown {
			return true, nil
		}
	}
	return false, nil
}
