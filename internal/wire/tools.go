package wire

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Endpoint names of the calls an agent makes as tools during a turn.
const (
	EndpointEvent             = "POST /agent/chats/{id}/events"
	EndpointParticipants      = "GET /agent/chats/{id}/participants"
	EndpointAddParticipant    = "POST /agent/chats/{id}/participants"
	EndpointRemoveParticipant = "DELETE /agent/chats/{id}/participants/{participant_id}"
	EndpointPeers             = "GET /agent/peers"
	EndpointCreateChat        = "POST /agent/chats"
)

// peersPageSize is the page size asked of /agent/peers; like
// /agent/chats it is page-numbered.
const peersPageSize = 100

// Participant is one item of a room's participants.
type Participant struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Handle string `json:"handle"`
	Type   string `json:"type"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// Peer is one item of GET /agent/peers.
type Peer struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Handle      string `json:"handle"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Source      string `json:"source"`
	IsContact   bool   `json:"is_contact"`
}

// Room is data of POST /agent/chats.
type Room struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	TaskID     string    `json:"task_id"`
	InsertedAt time.Time `json:"inserted_at,omitzero"`
}

// EventPosted is data of a successful POST /agent/chats/{id}/events.
type EventPosted struct {
	ID          string `json:"id"`
	MessageType string `json:"message_type"`
	Success     bool   `json:"success"`
}

// Event posts an event (thought, tool_call, ...) to chatID. Like Post it
// is sent once, never retried below the caller: a repeated POST would be
// a second event. metadata nil sends none.
func (c *Client) Event(ctx context.Context, chatID, messageType, content string, metadata map[string]any) (*EventPosted, error) {
	if err := checkIDs(EndpointEvent, chatID); err != nil {
		return nil, err
	}
	var payload struct {
		Event struct {
			Content     string         `json:"content"`
			MessageType string         `json:"message_type"`
			Metadata    map[string]any `json:"metadata,omitempty"`
		} `json:"event"`
	}
	payload.Event.Content, payload.Event.MessageType, payload.Event.Metadata = content, messageType, metadata
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointEvent, method: http.MethodPost,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/events", body: body, retry: false})
	if err != nil {
		return nil, err
	}
	var e EventPosted
	if err := decode(res, &e); err != nil {
		return nil, err
	}
	if e.ID == "" {
		return nil, res.protocolError("posted event has no id")
	}
	return &e, nil
}

// Participants lists chatID's participants (Band does not page them).
func (c *Client) Participants(ctx context.Context, chatID string) ([]Participant, error) {
	if err := checkIDs(EndpointParticipants, chatID); err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointParticipants, method: http.MethodGet,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/participants", retry: true})
	if err != nil {
		return nil, err
	}
	var ps []Participant
	if err := res.decodeData(&ps); err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.ID == "" {
			return nil, res.protocolError("participant has no id")
		}
	}
	return ps, nil
}

// AddParticipant adds participantID to chatID with role ("" means Band's
// default, member). Adding is a change of state, not a new object, so a
// repeat cannot add anyone twice: the call is retried on transient
// failures like a read.
func (c *Client) AddParticipant(ctx context.Context, chatID, participantID, role string) (*Participant, error) {
	if err := checkIDs(EndpointAddParticipant, chatID, participantID); err != nil {
		return nil, err
	}
	var payload struct {
		Participant struct {
			ParticipantID string `json:"participant_id"`
			Role          string `json:"role,omitempty"`
		} `json:"participant"`
	}
	payload.Participant.ParticipantID, payload.Participant.Role = participantID, role
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointAddParticipant, method: http.MethodPost,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/participants", body: body, retry: true})
	if err != nil {
		return nil, err
	}
	return decodeParticipant(res)
}

// RemoveParticipant takes participantID out of chatID. Like adding, it is
// a change of state and retried on transient failures.
func (c *Client) RemoveParticipant(ctx context.Context, chatID, participantID string) (*Participant, error) {
	if err := checkIDs(EndpointRemoveParticipant, chatID, participantID); err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointRemoveParticipant, method: http.MethodDelete,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/participants/" + url.PathEscape(participantID), retry: true})
	if err != nil {
		return nil, err
	}
	return decodeParticipant(res)
}

func decodeParticipant(res *response) (*Participant, error) {
	var p Participant
	if err := decode(res, &p); err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, res.protocolError("participant has no id")
	}
	return &p, nil
}

// Peers lists the agents and users this agent may add to a room, walking
// every page. notInChat, if set, leaves out the participants of that room.
func (c *Client) Peers(ctx context.Context, notInChat string) ([]Peer, error) {
	var all []Peer
	seen := make(map[string]bool)
	p := c.newPager(EndpointPeers, "/agent/peers", "1")
	for page := 1; ; page++ {
		q := url.Values{}
		q.Set("page", strconv.Itoa(page))
		q.Set("page_size", strconv.Itoa(peersPageSize))
		if notInChat != "" {
			q.Set("not_in_chat", notInChat)
		}
		res, err := c.send(ctx, request{endpoint: EndpointPeers, method: http.MethodGet, path: "/agent/peers", query: q, retry: true})
		if err != nil {
			return nil, err
		}
		var peers []Peer
		if err := res.decodeData(&peers); err != nil {
			return nil, err
		}
		var meta struct {
			TotalPages int `json:"total_pages"`
		}
		if err := res.decodeMetadata(&meta); err != nil {
			return nil, err
		}
		fresh := 0
		for _, peer := range peers {
			if peer.ID == "" {
				return nil, res.protocolError("peer has no id")
			}
			if !seen[peer.ID] {
				seen[peer.ID] = true
				all = append(all, peer)
				fresh++
			}
		}
		if page >= meta.TotalPages || len(peers) == 0 {
			return all, nil
		}
		if err := p.AdvancePage(page, len(peers), fresh); err != nil {
			return nil, err
		}
	}
}

// CreateChat creates a room owned by the agent. title "" lets Band title
// it. It is sent once, never retried below the caller: a repeat would be
// a second room.
func (c *Client) CreateChat(ctx context.Context, title string) (*Room, error) {
	var payload struct {
		Chat struct {
			Title string `json:"title,omitempty"`
		} `json:"chat"`
	}
	payload.Chat.Title = title
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointCreateChat, method: http.MethodPost, path: "/agent/chats", body: body, retry: false})
	if err != nil {
		return nil, err
	}
	var r struct {
		ID         string    `json:"id"`
		Title      *string   `json:"title"`
		TaskID     *string   `json:"task_id"`
		InsertedAt time.Time `json:"inserted_at"`
	}
	if err := decode(res, &r); err != nil {
		return nil, err
	}
	if r.ID == "" {
		return nil, res.protocolError("created chat has no id")
	}
	room := &Room{ID: r.ID, InsertedAt: r.InsertedAt}
	if r.Title != nil {
		room.Title = *r.Title
	}
	if r.TaskID != nil {
		room.TaskID = *r.TaskID
	}
	return room, nil
}
