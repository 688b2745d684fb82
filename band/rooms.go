package band

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// Endpoint names of the room calls this file adds, as errors and logs
// show them.
const (
	EndpointRoom       = "GET /agent/chats/{id}"
	EndpointRenameRoom = "PATCH /agent/chats/{id}"
	EndpointActivity   = "POST /agent/chats/{id}/activity"
)

// Rooms lists every room the agent is in, every page of them, each once.
// Only ID and Title are filled: the listing says no more that a room's
// guard needs.
func (c *Client) Rooms(ctx context.Context) ([]Room, error) {
	chats, err := c.api.Chats(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Room, len(chats))
	for i, ch := range chats {
		out[i] = Room{ID: ch.ID, Title: ch.Title}
	}
	return out, nil
}

// roomJSON is the document's ChatRoom.
type roomJSON struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	TaskID     string    `json:"task_id"`
	InsertedAt time.Time `json:"inserted_at"`
}

// Room reads one room the agent is in.
func (c *Client) Room(ctx context.Context, roomID string) (Room, error) {
	return c.room(ctx, wire.Call{Endpoint: EndpointRoom, Method: http.MethodGet, Path: "/agent/chats/" + url.PathEscape(roomID),
		IDs: []string{roomID}, Retry: true})
}

// RenameRoom renames a room the agent owns and locks the title, so Band no
// longer titles it from its messages. Renaming to the title it has changes
// nothing, so a repeat has the effect of one and the call is retried like
// a read. A room made by bandonce.Message.CreateRoom carries its guard's
// marker in its title: renaming it away loses the marker, and a
// redelivery of the turn that created it can no longer find it.
func (c *Client) RenameRoom(ctx context.Context, roomID, title string) (Room, error) {
	return c.room(ctx, wire.Call{Endpoint: EndpointRenameRoom, Method: http.MethodPatch, Path: "/agent/chats/" + url.PathEscape(roomID),
		IDs: []string{roomID}, Body: map[string]any{"chat": map[string]string{"title": title}}, Retry: true})
}

func (c *Client) room(ctx context.Context, call wire.Call) (Room, error) {
	ans, err := c.api.Do(ctx, call)
	if err != nil {
		return Room{}, err
	}
	var r roomJSON
	if err := ans.Data(&r); err != nil {
		return Room{}, err
	}
	if r.ID == "" {
		return Room{}, ans.Protocol("room has no id")
	}
	return Room(r), nil
}

// Activity reports whether the agent is working in the room (Band's
// "Reasoning…" indicator, cleared about 10 s after the last true; send
// true again about every 3 s while working). It sets state, so it is
// retried like a read.
func (c *Client) Activity(ctx context.Context, roomID string, working bool) error {
	_, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointActivity, Method: http.MethodPost, Path: "/agent/chats/" + url.PathEscape(roomID) + "/activity",
		IDs: []string{roomID}, Body: map[string]bool{"working": working}, Retry: true})
	return err
}
