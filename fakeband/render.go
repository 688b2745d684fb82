package fakeband

import "time"

// The JSON shapes the fake answers with. They are written for the wire,
// not shared with the client package, so a client bug cannot hide in a
// shared struct.

type chatMessageJSON struct {
	ID          string       `json:"id"`
	Content     string       `json:"content"`
	MessageType string       `json:"message_type"`
	SenderID    string       `json:"sender_id"`
	SenderType  string       `json:"sender_type"`
	SenderName  string       `json:"sender_name"`
	ChatRoomID  string       `json:"chat_room_id"`
	InsertedAt  time.Time    `json:"inserted_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
	Metadata    metadataJSON `json:"metadata"`
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

func renderMessage(m *message) chatMessageJSON {
	out := chatMessageJSON{
		ID:          m.id,
		Content:     m.content,
		MessageType: "text",
		SenderID:    m.sender.id,
		SenderType:  m.sender.kind,
		SenderName:  m.sender.name,
		ChatRoomID:  m.roomID,
		InsertedAt:  m.at,
		UpdatedAt:   m.at,
		Metadata:    metadataJSON{Mentions: []mentionJSON{}},
	}
	for _, mn := range m.mentions {
		j := mentionJSON{ID: mn.p.id, Handle: mn.p.handle, Name: mn.p.name}
		if mn.kind != kindMention {
			j.Kind = mn.kind
		}
		out.Metadata.Mentions = append(out.Metadata.Mentions, j)
	}
	return out
}

type roomJSON struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	InsertedAt time.Time `json:"inserted_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func renderRoom(r *room) roomJSON {
	return roomJSON{ID: r.id, Title: r.title, InsertedAt: r.at, UpdatedAt: r.at}
}

type agentMeJSON struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Handle     string    `json:"handle"`
	OwnerUUID  string    `json:"owner_uuid"`
	InsertedAt time.Time `json:"inserted_at"`
	UpdatedAt  time.Time `json:"updated_at"`
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
