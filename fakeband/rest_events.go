package fakeband

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// Band's limits on an event (ChatEventRequest in its OpenAPI document):
// events fan out to every participant, so both are capped.
const (
	eventContentMax  = 16384 // characters
	eventMetadataMax = 65536 // serialized bytes
)

// attentionKinds are the values metadata.kind must take on an attention event.
var attentionKinds = []string{"question", "assumption", "failure", "review"}

// eventIn is the body of POST .../events as the client sent it.
type eventIn struct {
	Content     *string         `json:"content"`
	MessageType *string         `json:"message_type"`
	Metadata    json.RawMessage `json:"metadata"`
}

func (b *Band) serveEvent(c *call) reply {
	var body struct {
		Event *eventIn `json:"event"`
	}
	bodyErr := decodeBody(c.r, &body)
	b.mu.Lock()
	defer b.mu.Unlock()
	// The room and the stop gate come before the body, as for a post:
	// Band refuses events from a stopped agent (PLT-944).
	r, err := b.postableRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	if bodyErr != nil || body.Event == nil {
		return errReply(unprocessable("validation_error", `body must be {"event": {"content", "message_type", "metadata"?}}`, "/event", "is invalid"))
	}
	m, err := b.eventLocked(r, c.who, body.Event)
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusCreated, eventCreatedJSON{ID: m.id, MessageType: m.kind, Success: true})
}

// PostEvent posts an event as an agent, with the same rules and effects as
// POST /agent/chats/{id}/events: messageType is one of the six event types,
// metadata a JSON object or nil. It returns the event's id, or an *Error
// with the code Band would answer with.
func (b *Band) PostEvent(roomID, agentID, messageType, content string, metadata json.RawMessage) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.participants[agentID]
	if p == nil || !p.isAgent() {
		return "", notFound("agent")
	}
	r, err := b.postableRoom(roomID, p)
	if err != nil {
		return "", err
	}
	m, err := b.eventLocked(r, p, &eventIn{Content: &content, MessageType: &messageType, Metadata: metadata})
	if err != nil {
		return "", err
	}
	return m.id, nil
}

// eventLocked validates an event and stores it. An event is a message
// of its own type that mentions no one: it is in its sender's /context
// (Band's document: "All messages the agent sent (any type: text,
// tool_call, tool_result, thought, etc.)"), never delivered, never on
// /next, and pushed as event_created on chat_room:{room}.
func (b *Band) eventLocked(r *room, sender *participant, in *eventIn) (*message, *Error) {
	meta, err := checkEvent(in)
	if err != nil {
		return nil, err
	}
	m := &message{id: b.ids.uuid(), roomID: r.id, sender: sender, kind: *in.MessageType, content: *in.Content, metadata: meta, at: b.stamp()}
	m.atText = m.at.Format(time.RFC3339Nano)
	r.messages = append(r.messages, m)
	b.messages[m.id] = m
	seq := b.truth.record(Event{Kind: EventChatEvent, AgentID: sender.id, RoomID: r.id, MessageID: m.id, Detail: m.kind})
	b.truth.chatEvents[r.id] = append(b.truth.chatEvents[r.id], ChatEvent{
		Seq: seq, ID: m.id, RoomID: r.id, SenderID: sender.id, MessageType: m.kind, Content: m.content, Metadata: slices.Clone(meta),
	})
	if len(b.sockets.byAgent) > 0 {
		payload := renderMessage(m)
		for _, id := range r.order {
			if b.participants[id].isAgent() {
				b.pushLocked(id, "chat_room:"+r.id, "event_created", payload)
			}
		}
	}
	return m, nil
}

// checkEvent applies Band's documented rules to an event and returns its
// metadata compacted (nil when absent or null).
func checkEvent(in *eventIn) (json.RawMessage, *Error) {
	if in.MessageType == nil || !slices.Contains(eventTypes, *in.MessageType) {
		return nil, unprocessable("validation_error", "message_type must be one of tool_call, tool_result, thought, error, task, attention", "/event/message_type", "is invalid")
	}
	if in.Content == nil || isBlank(*in.Content) {
		return nil, unprocessable("validation_error", "content can't be blank", "/event/content", "can't be blank")
	}
	if utf8.RuneCountInString(*in.Content) > eventContentMax {
		return nil, unprocessable("validation_error", "content is longer than 16384 characters", "/event/content", "should be at most 16384 character(s)")
	}
	raw := bytes.TrimSpace(in.Metadata)
	if len(raw) == 0 || string(raw) == "null" {
		if *in.MessageType == TypeAttention {
			return nil, unprocessable("validation_error", "an attention event needs metadata.kind", "/event/metadata/kind", "can't be blank")
		}
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, unprocessable("validation_error", "metadata must be an object", "/event/metadata", "is invalid")
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return nil, unprocessable("validation_error", "metadata must be an object", "/event/metadata", "is invalid")
	}
	if compact.Len() > eventMetadataMax {
		return nil, unprocessable("validation_error", "metadata is larger than 65536 bytes", "/event/metadata", "is too large")
	}
	if *in.MessageType == TypeAttention {
		var attention struct {
			Kind   *string         `json:"kind"`
			TaskID json.RawMessage `json:"task_id"`
		}
		_ = json.Unmarshal(compact.Bytes(), &attention) // an object, so this only fails on odd field types
		if attention.Kind == nil || !slices.Contains(attentionKinds, *attention.Kind) {
			return nil, unprocessable("validation_error", "metadata.kind must be question, assumption, failure or review", "/event/metadata/kind", "is invalid")
		}
		if len(attention.TaskID) > 0 && string(attention.TaskID) != "null" {
			// The fake has no tasks, so no task_id can reference one in this room.
			return nil, unprocessable("validation_error", "metadata.task_id must reference a task in this chat", "/event/metadata/task_id", "is invalid")
		}
	}
	return compact.Bytes(), nil
}
