package bandonce

import (
	"context"
	"errors"
	"fmt"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// guardIndex is a room's memory of the dedup keys on the agent's own posts,
// with the place its last read of /context ended, so a later guard reads
// only what is new. It belongs to the room's goroutine.
type guardIndex struct {
	keys map[string]bool
	// resume is where the last read ended: the cursor of its last page,
	// and the page size that fitted. The next read starts there again,
	// because a last page may grow and Band gives no cursor past its end;
	// re-reading one page is the price of not missing a post.
	resume wire.ContextWalk
	// walked: a read reached the room's end, so keys holds every key of
	// the agent's in the room up to resume.
	walked bool
}

// contains reports whether the agent has sent a message or event named
// name in the room (effect.name: an event's key is named apart), reading
// every page of /context it has not read yet. Only the agent's own items
// count, and only an exact key: a message's marker line, or an event's
// metadata member. A human quoting a marker, or a key that merely contains
// this one, is not a match.
func (g *guardIndex) contains(ctx context.Context, api *wire.Client, room, self, name string) (bool, error) {
	if g.keys[name] {
		return true, nil
	}
	err := api.WalkContext(ctx, room, &g.resume, func(page *wire.ContextPage) error {
		for _, item := range page.Items {
			if item.SenderID != self || item.SenderType != "Agent" {
				continue
			}
			if page.Oversize != nil {
				// The agent's own post, too large to read back: whether it
				// carries this key cannot be known.
				return fmt.Errorf("%w: the agent's own message %s cannot be read back: %w", errUnreadableRoom, item.ID, page.Oversize)
			}
			if k, ok := lifecycle.ParseMarker(item.Content); ok && !isEventType(item.MessageType) {
				// A message's marker; an event's text is the handler's
				// own, and may end with a line that only looks like one.
				g.add(k)
			}
			if k, ok := item.Metadata.String(lifecycle.MetadataKey); ok && lifecycle.ValidateKey(k) == nil {
				g.add(eventName(k))
			}
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errUnreadableRoom) && (errors.Is(err, wire.ErrTooLarge) || errors.Is(err, wire.ErrCursorRepeated) || errors.Is(err, wire.ErrTooManyPages)) {
			err = fmt.Errorf("%w: %w", errUnreadableRoom, err)
		}
		return false, err
	}
	g.walked = true
	return g.keys[name], nil
}

// errUnreadableRoom marks a guard read that no retry can complete: an
// item too large to read back, or a server whose paging does not end.
var errUnreadableRoom = errors.New("the room cannot be read to guard the send")

// release forgets what the index knows, for a room gone idle: the keys
// and the resume cursor go together (a cursor without the keys read
// before it would miss them), so the next guard reads the room from the
// start. Only a redelivery pays that read.
func (g *guardIndex) release() { *g = guardIndex{} }

// add records the name of a post the agent is known to have made.
func (g *guardIndex) add(name string) {
	if g.keys == nil {
		g.keys = make(map[string]bool)
	}
	g.keys[name] = true
}
