package fakeband

import (
	"encoding/json"
	"time"
)

// Sender types as Band spells them.
const (
	typeUser  = "User"
	typeAgent = "Agent"
)

// Delivery statuses as Band spells them (per message, per recipient).
const (
	StatusDelivered  = "delivered"
	StatusProcessing = "processing"
	StatusProcessed  = "processed"
	StatusFailed     = "failed"
)

// participant is an agent or a human.
type participant struct {
	id, key, name, handle string
	kind                  string // typeUser or typeAgent
	description           string // agents only; Band registers every agent with one
	at                    time.Time
}

func (p *participant) isAgent() bool { return p.kind == typeAgent }

// room is a chat room. Messages only grow, so a position in them is a
// stable cursor.
type room struct {
	id, title string
	taskID    string // "" when the room has no task
	ownerID   string
	roles     map[string]string // participant id -> owner|member
	order     []string          // participant ids in join order
	messages  []*message
	at        time.Time
}

func (r *room) has(id string) bool { _, ok := r.roles[id]; return ok }

// kind is the room's type as Band spells it: a room with a task is a task
// room, any other the default, direct (ChatRoomRequest in Band's document).
func (r *room) kind() string {
	if r.taskID != "" {
		return "task"
	}
	return "direct"
}

// mention is one resolved entry of a message's mentions.
type mention struct {
	p    *participant
	kind string // "mention" or "reference"
}

// message is a stored text message, or an agent's event: events are
// messages of another type that mention no one, so they share the room's
// order and its /context cursor.
type message struct {
	id, roomID string
	sender     *participant
	kind       string // message_type: "text", or an event type
	content    string // stored form, markers included
	mentions   []mention
	recipients []string        // ids of the kind=mention entries
	metadata   json.RawMessage // an event's metadata object; nil for text
	at         time.Time
	atText     string // at as JSON writes it, made once: a message is rendered again and again
}

// Message types: text for posts, and the six event types Band's events
// endpoint takes (ChatEventMessageType in its OpenAPI document).
const (
	TypeText       = "text"
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	TypeThought    = "thought"
	TypeError      = "error"
	TypeTask       = "task"
	TypeAttention  = "attention"
)

// eventTypes are the message types POST .../events accepts.
var eventTypes = []string{TypeToolCall, TypeToolResult, TypeThought, TypeError, TypeTask, TypeAttention}

func (m *message) mentionsAgent(id string) bool {
	for _, r := range m.recipients {
		if r == id {
			return true
		}
	}
	return false
}

// delivery is one recipient's lifecycle of one message.
type delivery struct {
	roomID   string
	status   string
	attempts int  // attempts opened so far; the newest is number attempts
	open     bool // the newest attempt is still open
}

type deliveryKey struct{ recipientID, messageID string }

// execution is an agent's presence in a room; stop and play act on it.
type execution struct {
	id, agentID, roomID string
	stopped             bool
	stoppedAt           time.Time
	working             bool // the agent's last /activity report
}

type pairKey struct{ agentID, roomID string }
