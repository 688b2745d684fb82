package bandonce

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/band-once/bandonce/internal/lifecycle"
)

// EventType is the type of an event: what it reports.
type EventType string

// The event types Band accepts.
const (
	EventThought    EventType = "thought"
	EventToolCall   EventType = "tool_call"
	EventToolResult EventType = "tool_result"
	EventError      EventType = "error"
	EventTask       EventType = "task"
	// EventAttention asks a human for something; its Metadata must say
	// which "kind": question, assumption, failure or review.
	EventAttention EventType = "attention"
)

// isEventType reports whether a message type read from Band is one of
// the event types: an event, whose key travels in its metadata.
func isEventType(t string) bool {
	switch EventType(t) {
	case EventThought, EventToolCall, EventToolResult, EventError, EventTask, EventAttention:
		return true
	}
	return false
}

// Event is what a handler reports to the room besides messages: a thought,
// a tool call and its result, an error, a task, or a request for a human's
// attention. Events need no mention.
type Event struct {
	Type EventType
	// Content is the human-readable text. It must not be blank; Band
	// takes at most 16384 characters.
	Content string
	// Metadata is the event's structured data (for tool_call, Band's
	// convention is {"function": {"name", "arguments"}, "id", "type"}).
	// Its "dedup_key" member is the shell's: leave it unset. Band takes at
	// most 64 KiB of it, serialized.
	Metadata map[string]any
	// DedupKey names the event as a unit of work; it is posted at most
	// once per room. Empty means a key derived from the message id and
	// the event's place among this turn's events without a DedupKey.
	DedupKey string
}

// Limits Band sets on an event.
const (
	maxEventContent  = 16384 // characters
	maxEventMetadata = 65536 // serialized bytes
)

func validateEvent(ev *Event) error {
	if !isEventType(string(ev.Type)) {
		return Permanent(fmt.Errorf("unknown event type %q", ev.Type))
	}
	if lifecycle.Blank(ev.Content) {
		return Permanent(errors.New("content is blank"))
	}
	if n := utf8.RuneCountInString(ev.Content); n > maxEventContent {
		return Permanent(fmt.Errorf("content is %d characters; Band takes at most %d", n, maxEventContent))
	}
	if ev.DedupKey != "" {
		if err := lifecycle.ValidateKey(ev.DedupKey); err != nil {
			return Permanent(err)
		}
	}
	if _, taken := ev.Metadata[lifecycle.MetadataKey]; taken {
		return Permanent(fmt.Errorf("metadata member %q is reserved for the dedup key; set DedupKey instead", lifecycle.MetadataKey))
	}
	if ev.Type == EventAttention {
		switch ev.Metadata["kind"] {
		case "question", "assumption", "failure", "review":
		default:
			return Permanent(errors.New(`an attention event needs metadata "kind": question, assumption, failure or review`))
		}
	}
	raw, err := json.Marshal(withKey(ev.Metadata, strings.Repeat("k", lifecycle.MaxKeyLen)))
	if err != nil {
		return Permanent(fmt.Errorf("metadata does not encode as JSON: %w", err))
	}
	if len(raw) > maxEventMetadata {
		return Permanent(fmt.Errorf("metadata is %d bytes serialized; Band takes at most %d", len(raw), maxEventMetadata))
	}
	ev.Metadata = maps.Clone(ev.Metadata) // the caller may change theirs while it is sent
	return nil
}
