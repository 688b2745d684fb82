// Package wire is the Band Agent REST API as the shell uses it: request
// shapes, the JSON envelopes, and the typed error every non-2xx becomes.
// It decides nothing about retries; the Doer it is given does.
package wire

import (
	"net/http"
	"time"
)

// Doer sends one logical request. retry reports whether the request may be
// repeated on a transient failure (reads and marks); the reply POST is sent
// with retry false and is never repeated below the shell's guard.
// endpoint names the call in logs and observations; "" names it by its
// method and path.
type Doer interface {
	Do(req *http.Request, endpoint string, retry bool) (*http.Response, error)
}

// Agent is data of GET /agent/me.
type Agent struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Handle    string `json:"handle"`
	OwnerUUID string `json:"owner_uuid"`
	// FeatureFlags are the flags Band turned on or off for the agent
	// (nil when it lists none).
	FeatureFlags map[string]any `json:"feature_flags"`
}

// Chat is one item of GET /agent/chats.
type Chat struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// Message is a ChatMessage as served by /messages/next and /context.
type Message struct {
	ID          string    `json:"id"`
	Content     string    `json:"content"`
	MessageType string    `json:"message_type"`
	SenderID    string    `json:"sender_id"`
	SenderType  string    `json:"sender_type"`
	SenderName  string    `json:"sender_name,omitempty"`
	ChatRoomID  string    `json:"chat_room_id,omitempty"`
	InsertedAt  time.Time `json:"inserted_at,omitzero"`
	Metadata    Metadata  `json:"metadata,omitzero"`
}

// Mark is data of the processing, processed and failed endpoints.
type Mark struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	AttemptNumber int    `json:"attempt_number"`
	Success       bool   `json:"success"`
}

// Mention is one entry of an outgoing message's mentions.
type Mention struct {
	ID     string `json:"id,omitempty"`
	Handle string `json:"handle,omitempty"`
}

// Posted is data of a successful POST /agent/chats/{id}/messages.
type Posted struct {
	ID         string `json:"id"`
	Success    bool   `json:"success"`
	Recipients []struct {
		ID     string `json:"id"`
		Handle string `json:"handle"`
	} `json:"recipients"`
}

// ContextPage is one page of GET /agent/chats/{id}/context, oldest first.
// NextCursor is empty when HasMore is false.
type ContextPage struct {
	Items      []Message
	NextCursor string
	HasMore    bool
	// Oversize is set on a page WalkContext could not read whole: its
	// Items carry ids and types but no content.
	Oversize *TooLargeError
	bytes    int // the size of the answer's body
}
