package bandonce

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/lifecycle"
)

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

// StripMentions removes every @[[uuid]] mention marker, and the whitespace
// that follows it, from content, then trims the result. A marker is "@[[",
// 36 hex digits and dashes, "]]"; the whitespace is spaces, tabs, line
// feeds, carriage returns and form feeds.
func StripMentions(content string) string {
	if !strings.Contains(content, mentionOpen) {
		return strings.TrimSpace(content)
	}
	var b strings.Builder
	b.Grow(len(content))
	rest := content
	for {
		i := strings.Index(rest, mentionOpen)
		if i < 0 {
			break
		}
		if n := markerLen(rest[i:]); n > 0 {
			b.WriteString(rest[:i])
			rest = strings.TrimLeft(rest[i+n:], "\t\n\f\r ")
		} else {
			b.WriteString(rest[:i+1])
			rest = rest[i+1:]
		}
	}
	b.WriteString(rest)
	return strings.TrimSpace(b.String())
}

const mentionOpen = "@[["

// markerLen is the length of the mention marker s begins with, or 0.
func markerLen(s string) int {
	const n = len(mentionOpen) + 36 + len("]]")
	if len(s) < n || s[n-2:n] != "]]" {
		return 0
	}
	for _, c := range []byte(s[len(mentionOpen) : n-2]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '-') {
			return 0
		}
	}
	return n
}

// MaxStepResult bounds the result a Step records in the ledger.
const MaxStepResult = 1 << 20

// Send posts a message to the room now, before the handler returns, at
// most once per dedup key: the same guard as the final reply (the ledger
// first, the room read only when it can find something, never a blind
// re-POST). A handler may send any number of messages.
//
// A Reply without DedupKey gets "msg:<message id>:send:<n>", n counting
// this turn's Sends without a DedupKey from 1: the same at every delivery
// of a handler that sends in the same order, so a redelivery after a crash
// skips what was already sent. A handler whose sends depend on something
// that may change between deliveries should give each a DedupKey.
//
// Send returns nil once the message is in the room, whether this call
// posted it or an earlier delivery did. After an interrupt or a stop
// reached the room it sends nothing and returns the cause (ErrInterrupted,
// ErrStopped); a Band refusal is an *APIError (wrapped with Permanent
// when retrying cannot help).
func (m *Message) Send(ctx context.Context, rep Reply) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	rep.Mentions = append([]string(nil), rep.Mentions...)
	if len(rep.Mentions) == 0 && m.SenderID != "" {
		rep.Mentions = []string{m.SenderID}
	}
	if err := validateReply(&rep, m.turn.r.s.cfg.MaxResponseBytes); err != nil {
		return fmt.Errorf("bandonce: send: %w", err)
	}
	return m.turn.emit(ctx, func(t *turn) effect {
		if rep.DedupKey != "" {
			return effect{key: rep.DedupKey, defaultKey: derivedKey(t.msgID, rep.DedupKey), reply: &rep}
		}
		p := t.placeOf(ctx)
		p.sends++
		return effect{key: DefaultKey(t.msgID) + p.prefix + ":send:" + strconv.Itoa(p.sends), defaultKey: true, reply: &rep}
	})
}

// Event posts an event to the room now, at most once per dedup key, with
// the same guard as Send. Its key travels in the event's metadata, not in
// its text. An Event without DedupKey gets "msg:<message id>:event:<n>",
// n counting this turn's Events without a DedupKey from 1. The errors are
// Send's.
func (m *Message) Event(ctx context.Context, ev Event) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	if err := validateEvent(&ev); err != nil {
		return fmt.Errorf("bandonce: event: %w", err)
	}
	return m.turn.emit(ctx, func(t *turn) effect {
		if ev.DedupKey != "" {
			return effect{key: ev.DedupKey, defaultKey: derivedKey(t.msgID, ev.DedupKey), event: &ev}
		}
		p := t.placeOf(ctx)
		p.events++
		return effect{key: DefaultKey(t.msgID) + p.prefix + ":event:" + strconv.Itoa(p.events), defaultKey: true, event: &ev}
	})
}

// Step runs fn, a side effect outside Band, at most once per message and
// step name as far as the Ledger can know: the first run records fn's
// result in the ledger, and a later delivery of the message returns the
// recorded result without calling fn. fn gets an idempotency key that is
// the same at every delivery (derived from the agent, room, message and
// name): hand it to the external system (a payment API's Idempotency-Key)
// to cover the window between the effect and the record, where a crash
// makes the step run again. With a MemoryLedger the record is lost with
// the process, so after a crash only that key stands between the step and
// a second effect.
//
// fn runs with ctx, so an interrupt or a stop cancels it; Step does not
// call fn once a signal aborted the turn and returns the cause instead. An
// error from fn is returned as is and nothing is recorded, so the step
// runs again on a later delivery. A result larger than MaxStepResult is an
// error. Two Steps of one name must not run at the same time.
//
// An fn cut off by an interrupt or a stop returns an error that names the
// step and matches the signal (errors.Is(err, ErrInterrupted)); the shell
// logs it at info. Every Step call is logged at debug (name, key, whether
// fn ran or the ledger's result was replayed, duration, error) and passed
// to Hooks.Step, which package bandonce/otel turns into a span.
func (m *Message) Step(ctx context.Context, name string, fn func(ctx context.Context, idempotencyKey string) ([]byte, error)) ([]byte, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	if err := lifecycle.ValidateKey(name); err != nil {
		return nil, fmt.Errorf("bandonce: step name: %w", Permanent(err))
	}
	return m.turn.step(ctx, name, fn)
}

// Band returns the shell's client for Band's room tools, for calls this
// Message has no shortcut for (nil for a Message the shell did not
// deliver). Its calls are not guarded: what they change can happen again
// on a redelivery.
func (m *Message) Band() *band.Client {
	if m.turn == nil {
		return nil
	}
	return m.turn.r.s.client
}

// Me returns the agent the shell serves, as Band named it at start-up
// (who am I), without a request.
func (m *Message) Me() band.Agent {
	if m.turn == nil {
		return band.Agent{}
	}
	s := m.turn.r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return band.Agent{ID: s.me.ID, Name: s.me.Name, Handle: s.me.Handle, FeatureFlags: maps.Clone(s.me.FeatureFlags)}
}

// Participants lists the room's participants.
func (m *Message) Participants(ctx context.Context) ([]band.Participant, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	return m.turn.r.s.client.Participants(ctx, m.RoomID)
}

// Peers lists the agents and users this agent may add to the room: its
// peers that are not in it yet.
func (m *Message) Peers(ctx context.Context) ([]band.Peer, error) {
	if m.turn == nil {
		return nil, ErrNotInTurn
	}
	return m.turn.r.s.client.Peers(ctx, m.RoomID)
}

// AddParticipant adds a peer to the room with role ("" means member).
// Adding is a change of state, so a redelivered handler that adds the same
// participant again has the effect of one add. After an interrupt or a
// stop reached the room it changes nothing and returns the cause.
func (m *Message) AddParticipant(ctx context.Context, participantID, role string) (band.Participant, error) {
	if m.turn == nil {
		return band.Participant{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.Participant, error) {
		return m.turn.r.s.client.AddParticipant(ctx, m.RoomID, participantID, role)
	})
}

// RemoveParticipant takes a participant out of the room; removing one who
// already left is not an error. After an interrupt or a stop reached the
// room it changes nothing and returns the cause.
func (m *Message) RemoveParticipant(ctx context.Context, participantID string) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	_, err := unguarded(ctx, m.turn, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.turn.r.s.client.RemoveParticipant(ctx, m.RoomID, participantID)
	})
	return err
}
