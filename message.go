package bandonce

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/band"
)

// Handler does the work for one message. It returns the reply to post, or
// nil to consume the message without posting. It must honour ctx: an
// interrupt, stop or shutdown cancels it, and context.Cause(ctx) says which
// (ErrInterrupted, ErrStopped, ErrShutdown, ErrSuperseded).
//
// The shell decides the message's fate after Handler returns, never while it
// runs, so a handler that finishes its reply before noticing a cancellation
// is judged by the cause, not by a race.
type Handler func(ctx context.Context, msg *Message) (*Reply, error)

// Message is one message of a room, as handed to a Handler.
type Message struct {
	// ID is Band's message id.
	ID string
	// RoomID is the chat room the message belongs to.
	RoomID string
	// Content is the message as stored, with @[[uuid]] mention markers.
	Content string
	// SenderID, SenderType ("User" or "Agent") and SenderName describe the
	// author.
	SenderID   string
	SenderType string
	SenderName string
	// Attempt is Band's attempt number for this delivery: 1 the first time
	// the message is claimed, higher after a crash, a stop or a failure.
	Attempt int
	// InsertedAt is when Band stored the message; zero if it did not say.
	InsertedAt time.Time

	turn        *turn // the handler call this message was given to
	loadContext func(context.Context) ([]ContextItem, error)
	ctxOnce     sync.Mutex
	ctxItems    []ContextItem
	ctxLoaded   bool
}

// ContextItem is one entry of a room's context as the agent sees it: its
// own messages and events, and the text messages that mention it.
type ContextItem = band.ContextItem

// Reply is a message the shell posts: the one a Handler returns, or one
// it sends with Message.Send.
//
// Two mistakes Band would refuse only after the work was done are caught
// before anything is posted: a Reply without Mentions mentions the
// message's sender, and a Reply larger than MaxReplyBytes serialized is
// refused with a *ReplyTooLargeError naming its size (for a handler's
// reply, a Permanent failure: the message is dead-lettered).
type Reply struct {
	// Content is the text to post. It must not be blank.
	Content string
	// Mentions are the participants the reply mentions: participant ids,
	// or handles written with a leading "@" ("@ada", "@owner/agent-slug"),
	// which Band resolves among the room's participants. Band requires at
	// least one, each a participant of the room other than the agent.
	// Empty means the sender of the message being handled.
	Mentions []string
	// DedupKey is the natural key of the unit of work. The shell posts a
	// reply with a given key at most once per room. Empty means the
	// message's default key, DefaultKey(msg.ID), so every reply is guarded.
	DedupKey string
}

// DefaultKey is the dedup key of a reply whose DedupKey is empty.
func DefaultKey(messageID string) string { return "msg:" + messageID }

// derivedKey reports whether key names a unit of work of message
// messageID alone: its default key, or a key under it
// ("msg:<message id>:..."), as the default keys of sends, events and
// writes are, and package agentloop's. No other message can have written
// it, so on Band's first attempt of the message no earlier attempt can
// have either, and its guard posts without a read.
func derivedKey(messageID, key string) bool {
	d := DefaultKey(messageID)
	return key == d || (len(key) > len(d) && key[:len(d)] == d && key[len(d)] == ':')
}

// Body returns the content with every @[[uuid]] mention marker, and the
// whitespace after it, removed, then trimmed.
func (m *Message) Body() string { return StripMentions(m.Content) }

// RoomContext returns the room's context (the agent's own messages and
// events, and the text messages that mention it, oldest first). It is read from Band on the
// first call only; a handler that never calls it costs no request.
func (m *Message) RoomContext(ctx context.Context) ([]ContextItem, error) {
	m.ctxOnce.Lock()
	defer m.ctxOnce.Unlock()
	if m.ctxLoaded {
		return m.ctxItems, nil
	}
	if m.loadContext == nil {
		return nil, nil
	}
	items, err := m.loadContext(ctx)
	if err != nil {
		return nil, err
	}
	m.ctxItems, m.ctxLoaded = items, true
	return items, nil
}

var mentionMarker = regexp.MustCompile(`@\[\[[0-9A-Fa-f-]{36}\]\]\s*`)

// StripMentions removes every @[[uuid]] mention marker, and the whitespace
// that follows it, from content, then trims the result.
func StripMentions(content string) string {
	return strings.TrimSpace(mentionMarker.ReplaceAllString(content, ""))
}
