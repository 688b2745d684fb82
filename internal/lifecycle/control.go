package lifecycle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Control modes and scopes of Band's agent.control push.
const (
	ModeInterrupt = "interrupt"
	ModeStop      = "stop"
	ModePlay      = "play"
	ScopeAgent    = "agent"
	ScopeRoom     = "room"
)

// Control is an agent.control payload. Unknown fields are accepted and
// ignored, so the platform can add fields without breaking agents.
type Control struct {
	Mode          string `json:"mode"`
	Scope         string `json:"scope"`
	AgentID       string `json:"agent_id"`
	RoomID        string `json:"room_id"`
	ExecutionID   string `json:"execution_id"`
	Reason        string `json:"reason"`
	CorrelationID string `json:"correlation_id"`
}

// ErrInvalidControl is wrapped by ParseControl's errors.
var ErrInvalidControl = errors.New("invalid agent.control payload")

// ParseControl decodes and validates a payload. Scope and agent_id must be
// valid; an unknown mode parses (KnownMode says so) so that it can be
// logged as a warning instead of rejected as garbage.
func ParseControl(raw []byte) (Control, error) {
	var wire struct {
		Mode          *string `json:"mode"`
		Scope         *string `json:"scope"`
		AgentID       *string `json:"agent_id"`
		RoomID        *string `json:"room_id"`
		ExecutionID   *string `json:"execution_id"`
		Reason        *string `json:"reason"`
		CorrelationID *string `json:"correlation_id"`
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return Control{}, fmt.Errorf("%w: empty", ErrInvalidControl)
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrInvalidControl, err)
	}
	c := Control{
		Mode: deref(wire.Mode), Scope: deref(wire.Scope), AgentID: deref(wire.AgentID),
		RoomID: deref(wire.RoomID), ExecutionID: deref(wire.ExecutionID),
		Reason: deref(wire.Reason), CorrelationID: deref(wire.CorrelationID),
	}
	switch {
	case c.Mode == "":
		return Control{}, fmt.Errorf("%w: mode is required", ErrInvalidControl)
	case c.Scope != ScopeAgent && c.Scope != ScopeRoom:
		return Control{}, fmt.Errorf("%w: scope %q is neither agent nor room", ErrInvalidControl, c.Scope)
	case c.AgentID == "":
		return Control{}, fmt.Errorf("%w: agent_id is required", ErrInvalidControl)
	}
	return c, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// KnownMode reports whether the mode is one the shell acts on.
func (c Control) KnownMode() bool {
	return c.Mode == ModeInterrupt || c.Mode == ModeStop || c.Mode == ModePlay
}

// Targets are the rooms a signal applies to.
type Targets struct {
	Rooms []string
	// AgentWide is true for an agent-scope signal without a room: it also
	// governs rooms that join later (an agent-wide stop holds for them).
	AgentWide bool
	// Note explains a signal that applies to nothing, for the log.
	Note string
}

// Route resolves a signal's rooms among those the agent serves now. A
// room id wins over the scope; an agent-scope signal without one fans out
// to every room; a room-scope signal without one, or a room the agent is
// not in, applies to nothing.
func Route(c Control, rooms []string) Targets {
	switch {
	case c.RoomID != "":
		for _, r := range rooms {
			if r == c.RoomID {
				return Targets{Rooms: []string{r}}
			}
		}
		return Targets{Note: "room " + c.RoomID + " is not served by this agent"}
	case c.Scope == ScopeAgent:
		return Targets{Rooms: append([]string(nil), rooms...), AgentWide: true}
	default:
		return Targets{Note: "room-scope signal without room_id"}
	}
}

// SeenSet remembers the last N correlation ids, oldest evicted first. A
// repeat does not refresh its place: eviction follows first sight.
type SeenSet struct {
	max   int
	order []string
	seen  map[string]struct{}
}

// NewSeenSet returns a set that keeps at most limit ids (at least 1).
func NewSeenSet(limit int) *SeenSet {
	return &SeenSet{max: max(limit, 1), seen: make(map[string]struct{})}
}

// Add records id and reports whether it was new. The empty id is never
// recorded and always new: a signal without a correlation id is applied
// every time.
func (s *SeenSet) Add(id string) bool {
	if id == "" {
		return true
	}
	if _, dup := s.seen[id]; dup {
		return false
	}
	s.seen[id] = struct{}{}
	s.order = append(s.order, id)
	if len(s.order) > s.max {
		delete(s.seen, s.order[0])
		s.order = s.order[1:]
	}
	return true
}
