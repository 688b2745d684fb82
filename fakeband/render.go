package fakeband

import (
	"encoding/json"
	"time"
)

// The JSON shapes the fake answers with. They are written for the wire,
// not shared with the client package, so a client bug cannot hide in a
// shared struct.

type chatMessageJSON struct {
	ID          string `json:"id"`
	Content     string `json:"content"`
	MessageType string `json:"message_type"`
	SenderID    string `json:"sender_id"`
	SenderType  string `json:"sender_type"`
	SenderName  string `json:"sender_name"`
	ChatRoomID  string `json:"chat_room_id"`
	InsertedAt  string `json:"inserted_at"` // RFC 3339, as a time.Time writes itself
	UpdatedAt   string `json:"updated_at"`
	Metadata    any    `json:"metadata"` // metadataJSON for text, the event's own object for events
}

type metadataJSON struct {
	Mentions []mentionJSON `json:"mentions"`
}

type mentionJSON struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
	Kind   string `json:"kind,omitempty"` // only "reference" is spelled out
}

// emptyObject is the metadata of an event sent without any.
var emptyObject = json.RawMessage(`{}`)

func renderMessage(m *message) chatMessageJSON {
	out := chatMessageJSON{
		ID:          m.id,
		Content:     m.content,
		MessageType: m.kind,
		SenderID:    m.sender.id,
		SenderType:  m.sender.kind,
		SenderName:  m.sender.name,
		ChatRoomID:  m.roomID,
		InsertedAt:  m.atText,
		UpdatedAt:   m.atText,
	}
	if m.kind != TypeText {
		out.Metadata = emptyObject
		if m.metadata != nil {
			out.Metadata = m.metadata
		}
		return out
	}
	meta := metadataJSON{Mentions: make([]mentionJSON, 0, len(m.mentions))}
	for _, mn := range m.mentions {
		j := mentionJSON{ID: mn.p.id, Handle: mn.p.handle, Name: mn.p.name}
		if mn.kind != kindMention {
			j.Kind = mn.kind
		}
		meta.Mentions = append(meta.Mentions, j)
	}
	out.Metadata = meta
	return out
}

// roomJSON is Band's ChatRoom. title is null for a room created
// without one (Band then titles it itself), task_id null without a task.
type roomJSON struct {
	ID         string    `json:"id"`
	Title      *string   `json:"title"`
	TaskID     *string   `json:"task_id"`
	InsertedAt time.Time `json:"inserted_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func renderRoom(r *room) roomJSON {
	out := roomJSON{ID: r.id, InsertedAt: r.at, UpdatedAt: r.at}
	if r.title != "" {
		title := r.title // copied: the answer is encoded after the lock is released, and a rename writes r.title
		out.Title = &title
	}
	if r.taskID != "" {
		out.TaskID = &r.taskID
	}
	return out
}

type agentMeJSON struct {
	ID                string    `json:"id"`
	Name              string    `json:"name"`
	Handle            string    `json:"handle"`
	Description       string    `json:"description"`
	OwnerUUID         string    `json:"owner_uuid"`
	ListedInDirectory bool      `json:"listed_in_directory"`
	Tags              []string  `json:"tags"`
	InsertedAt        time.Time `json:"inserted_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	// FeatureFlags is the member the official SDKs' AgentMe model has
	// beside the document's fields (PY: tests/platform/test_link_credentials.py
	// builds a "schema-valid" body with it); the fake turns no flag on.
	FeatureFlags map[string]any `json:"feature_flags"`
}

type markJSON struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	AttemptNumber int    `json:"attempt_number"`
	Success       bool   `json:"success"`
}

type recipientJSON struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
}

type postedJSON struct {
	ID         string          `json:"id"`
	Success    bool            `json:"success"`
	Recipients []recipientJSON `json:"recipients"`
}

// participantJSON is Band's ChatParticipant, as the participants
// endpoints answer it.
type participantJSON struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Handle string `json:"handle"`
	Type   string `json:"type"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// participantActive is every participant's status: the fake has no
// invitations or departures in progress.
const participantActive = "active"

func renderParticipant(p *participant, role string) participantJSON {
	return participantJSON{ID: p.id, Name: p.name, Handle: p.handle, Type: p.kind, Role: role, Status: participantActive}
}

// eventCreatedJSON is Band's EventCreatedResponse.
type eventCreatedJSON struct {
	ID          string `json:"id"`
	MessageType string `json:"message_type"`
	Success     bool   `json:"success"`
}

// peerJSON is Band's Peer.
type peerJSON struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Handle      string  `json:"handle"`
	Type        string  `json:"type"`
	Description *string `json:"description"`
	Source      string  `json:"source"` // registry: the owner and sibling agents
	IsContact   bool    `json:"is_contact"`
}

type activityJSON struct {
	Working bool `json:"working"`
}
