package lifecycle

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The payload cases of the Python SDK's test_control_payload.py.
func TestParseControlPayloads(t *testing.T) {
	for _, mode := range []string{ModeInterrupt, ModeStop, ModePlay} {
		raw := fmt.Sprintf(`{"type":"agent.control","mode":%q,"scope":"agent","agent_id":"a1","execution_id":"e1","room_id":"r1","reason":"user_requested","correlation_id":"ctl-1"}`, mode)
		c, err := ParseControl([]byte(raw))
		require.NoError(t, err, mode)
		assert.Equal(t, Control{Mode: mode, Scope: ScopeAgent, AgentID: "a1", RoomID: "r1", ExecutionID: "e1", Reason: "user_requested", CorrelationID: "ctl-1"}, c)
		assert.True(t, c.KnownMode())
	}
	c, err := ParseControl([]byte(`{"mode":"stop","scope":"room","agent_id":"a1","room_id":"r2"}`))
	require.NoError(t, err)
	assert.Equal(t, "r2", c.RoomID)

	c, err = ParseControl([]byte(`{"mode":"play","scope":"agent","agent_id":"a1","room_id":null,"execution_id":null}`))
	require.NoError(t, err)
	assert.Empty(t, c.RoomID+c.ExecutionID+c.Reason+c.CorrelationID, "optional fields default to empty")

	c, err = ParseControl([]byte(`{"mode":"play","scope":"agent","agent_id":"a1","brand_new_field":{"x":1}}`))
	require.NoError(t, err, "unknown fields are accepted")

	c, err = ParseControl([]byte(`{"mode":"pause","scope":"agent","agent_id":"a1"}`))
	require.NoError(t, err, "an unknown mode parses so it can be warned about")
	assert.False(t, c.KnownMode())

	for name, raw := range map[string]string{
		"scope cluster":    `{"mode":"stop","scope":"cluster","agent_id":"a1"}`,
		"missing agent_id": `{"mode":"stop","scope":"agent"}`,
		"missing mode":     `{"scope":"agent","agent_id":"a1"}`,
		"wrong type":       `{"mode":1,"scope":"agent","agent_id":"a1"}`,
		"not json":         `stop`,
		"empty":            ``,
		"array":            `[]`,
	} {
		_, err := ParseControl([]byte(raw))
		assert.ErrorIs(t, err, ErrInvalidControl, name)
	}
}

// The routing cases of test_runtime_control.py.
func TestRoute(t *testing.T) {
	rooms := []string{"r1", "r2"}
	assert.Equal(t, Targets{Rooms: rooms, AgentWide: true}, Route(Control{Scope: ScopeAgent}, rooms), "agent scope fans out")
	assert.Equal(t, []string{"r2"}, Route(Control{Scope: ScopeRoom, RoomID: "r2"}, rooms).Rooms)
	assert.Equal(t, []string{"r1"}, Route(Control{Scope: ScopeAgent, RoomID: "r1"}, rooms).Rooms, "a room id wins over agent scope")
	ghost := Route(Control{Scope: ScopeRoom, RoomID: "ghost"}, rooms)
	assert.Empty(t, ghost.Rooms)
	assert.NotEmpty(t, ghost.Note)
	noRoom := Route(Control{Scope: ScopeRoom}, rooms)
	assert.Empty(t, noRoom.Rooms)
	assert.NotEmpty(t, noRoom.Note)
	assert.Empty(t, Route(Control{Scope: ScopeAgent}, nil).Rooms, "no rooms: a no-op")
}

func TestSeenSetDedupsAndEvictsByFirstSight(t *testing.T) {
	s := NewSeenSet(256)
	assert.True(t, s.Add("ctl-1"))
	assert.False(t, s.Add("ctl-1"), "the same id twice is applied once")
	assert.True(t, s.Add("ctl-2"), "distinct ids are both applied")
	assert.True(t, s.Add(""))
	assert.True(t, s.Add(""), "no id: applied every time")
	for i := range 256 {
		s.Add(fmt.Sprint("x", i))
	}
	assert.True(t, s.Add("ctl-1"), "evicted after 256 newer ids")
	assert.LessOrEqual(t, len(s.order), 256)
}

func FuzzParseControl(f *testing.F) {
	f.Add([]byte(`{"mode":"stop","scope":"room","agent_id":"a","room_id":"r","correlation_id":"c"}`))
	f.Add([]byte(`{"mode":"interrupt","scope":"agent","agent_id":"a","room_id":null}`))
	f.Add([]byte(`{"mode":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseControl(raw)
		if err != nil {
			return
		}
		if c.AgentID == "" || c.Mode == "" || (c.Scope != ScopeAgent && c.Scope != ScopeRoom) {
			t.Fatalf("accepted an invalid payload: %+v", c)
		}
		tg := Route(c, []string{"r", "s"})
		if c.RoomID != "" && len(tg.Rooms) > 1 {
			t.Fatalf("a room-targeted signal fanned out: %+v", tg)
		}
	})
}
