package band

import "context"

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
