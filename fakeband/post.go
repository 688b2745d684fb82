package fakeband

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Mention kinds.
const (
	kindMention   = "mention"   // delivers the message
	kindReference = "reference" // narrative only
)

// mentionIn is one entry of a request's mentions, as the client sent it.
type mentionIn struct {
	ID     string  `json:"id"`
	Handle string  `json:"handle"`
	Kind   *string `json:"kind"`
}

// Say posts a text message as any participant (normally a human), with
// the same rules and side effects as a post over HTTP: mention markers are
// prepended, the message is delivered to every mentioned participant and
// message_created is pushed. It returns the message id, or an *Error with
// the code Band would answer with.
func (b *Band) Say(roomID, senderID, content string, mentionIDs ...string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sender := b.participants[senderID]
	if sender == nil {
		return "", notFound("participant")
	}
	mentions := make([]mentionIn, len(mentionIDs))
	for i, id := range mentionIDs {
		mentions[i] = mentionIn{ID: id}
	}
	m, err := b.postLocked(roomID, sender, &content, mentions)
	if err != nil {
		return "", err
	}
	return m.id, nil
}

// postableRoom is the room sender may post in: 404 outside its rooms,
// 403 while an agent sender is stopped there.
func (b *Band) postableRoom(roomID string, sender *participant) (*room, *Error) {
	r, err := b.memberRoom(roomID, sender)
	if err != nil {
		return nil, err
	}
	if sender.isAgent() && b.stoppedLocked(sender.id, r.id) {
		return nil, ErrStopped
	}
	return r, nil
}

// postLocked checks a post in Band's order (room, stop gate, content,
// mentions) and stores it. content is nil when the body had none.
func (b *Band) postLocked(roomID string, sender *participant, content *string, in []mentionIn) (*message, *Error) {
	r, err := b.postableRoom(roomID, sender)
	if err != nil {
		return nil, err
	}
	if content == nil || isBlank(*content) {
		return nil, unprocessable("validation_error", "content can't be blank", "/message/content", "can't be blank")
	}
	mentions, err := b.resolveMentions(r, sender, in)
	if err != nil {
		return nil, err
	}
	return b.storeLocked(r, sender, *content, mentions), nil
}

// isBlank reports content with nothing visible in it: spaces and format
// characters (zero-width spaces, joiners, BOM) do not count.
func isBlank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)
	}) == ""
}

func (b *Band) resolveMentions(r *room, sender *participant, in []mentionIn) ([]mention, *Error) {
	const required = "at least one mention of kind mention is required"
	if len(in) == 0 {
		return nil, unprocessable("mentions_required", required, "/message/mentions", required)
	}
	var out []mention
	seen := map[string]bool{}
	delivering := false
	for i, m := range in {
		at := fmt.Sprintf("/message/mentions/%d", i)
		kind := kindMention
		if m.Kind != nil {
			kind = *m.Kind
		}
		if kind != kindMention && kind != kindReference {
			return nil, unprocessable("invalid_mention_kind", "mention kind must be mention or reference", at+"/kind", "is invalid")
		}
		p, err := b.resolveOne(r, m, at)
		if err != nil {
			return nil, err
		}
		if p.id == sender.id {
			return nil, unprocessable("cannot_mention_self", "a participant cannot mention itself", at, "cannot mention yourself")
		}
		if seen[p.id] {
			return nil, unprocessable("duplicate_mentions", "the same participant is mentioned twice", at, "is a duplicate")
		}
		seen[p.id] = true
		delivering = delivering || kind == kindMention
		out = append(out, mention{p: p, kind: kind})
	}
	if !delivering {
		return nil, unprocessable("mentions_required", required, "/message/mentions", required)
	}
	return out, nil
}

// resolveOne finds a mention's participant: id wins over handle.
func (b *Band) resolveOne(r *room, m mentionIn, at string) (*participant, *Error) {
	const notInRoom = "mentioned participant is not in this chat"
	switch {
	case m.ID != "":
		p := b.participants[m.ID]
		if p == nil || !r.has(p.id) {
			return nil, unprocessable("mentioned_participant_not_in_room", notInRoom, at+"/id", notInRoom)
		}
		return p, nil
	case m.Handle != "":
		p := b.byHandle[strings.TrimPrefix(m.Handle, "@")]
		if p == nil {
			return nil, unprocessable("handle_not_found", "no participant has this handle", at+"/handle", "not found")
		}
		if !r.has(p.id) {
			return nil, unprocessable("mentioned_participant_not_in_room", notInRoom, at+"/handle", notInRoom)
		}
		return p, nil
	default:
		return nil, unprocessable("mention_missing_identifier", "a mention needs an id or a handle", at, "id or handle is required")
	}
}

// storeLocked applies a validated post: stored content, deliveries, truth
// and pushes.
func (b *Band) storeLocked(r *room, sender *participant, content string, mentions []mention) *message {
	m := &message{id: b.ids.uuid(), roomID: r.id, sender: sender, kind: TypeText, mentions: mentions, at: b.stamp()}
	m.atText = m.at.Format(time.RFC3339Nano)
	m.content = withMarkers(content, mentions)
	for _, mn := range mentions {
		if mn.kind == kindMention {
			m.recipients = append(m.recipients, mn.p.id)
			b.deliveries[deliveryKey{mn.p.id, m.id}] = &delivery{roomID: r.id, status: StatusDelivered}
		}
	}
	r.messages = append(r.messages, m)
	b.messages[m.id] = m
	seq := b.truth.record(Event{Kind: EventPost, AgentID: sender.id, RoomID: r.id, MessageID: m.id, Detail: sender.kind})
	b.truth.posts[r.id] = append(b.truth.posts[r.id], Post{
		Seq: seq, ID: m.id, RoomID: r.id, SenderID: sender.id, SenderType: sender.kind,
		Content: m.content, Mentions: append([]string(nil), m.recipients...),
	})
	payload := renderMessage(m)
	for _, id := range m.recipients {
		if b.participants[id].isAgent() {
			b.pushLocked(id, "chat_room:"+r.id, "message_created", payload)
		}
	}
	if sender.isAgent() {
		b.pushLocked(sender.id, "chat_room:"+r.id, "message_created", payload)
	}
	return m
}

// withMarkers prepends one "@[[uuid]] " per mention, leaving out a
// mention whose token already starts the content, as Band does.
func withMarkers(content string, mentions []mention) string {
	var b strings.Builder
	for _, mn := range mentions {
		if !hasMarker(content, mn.p.id) {
			b.Grow(len(mn.p.id) + 6 + len(content))
			b.WriteString("@[[")
			b.WriteString(mn.p.id)
			b.WriteString("]] ")
		}
	}
	if b.Len() == 0 {
		return content
	}
	b.WriteString(content)
	return b.String()
}

// hasMarker reports whether content begins with id's marker, @[[id]].
func hasMarker(content, id string) bool {
	rest, ok := strings.CutPrefix(content, "@[[")
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, id)
	return ok && strings.HasPrefix(rest, "]]")
}
