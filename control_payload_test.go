package bandonce_test

// The Python payload suite (§5.5): the parser's verdicts, and what the
// shell does with each payload when it arrives on the socket.

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/lifecycle"
)

// §5.5.1: every field set, for each mode, parses and round-trips; and the
// shell acts on each.
func TestEveryModeWithEveryFieldParsesAndApplies(t *testing.T) {
	for _, mode := range []string{"interrupt", "stop", "play"} {
		t.Run(mode, func(t *testing.T) {
			want := lifecycle.Control{Mode: mode, Scope: "agent", AgentID: "agent-1", RoomID: "room-1",
				ExecutionID: "exec-1", Reason: "user_requested", CorrelationID: "ctl-abc_-9"}
			raw, err := json.Marshal(map[string]string{"type": "agent.control", "mode": mode, "scope": "agent",
				"agent_id": "agent-1", "room_id": "room-1", "execution_id": "exec-1", "reason": "user_requested",
				"correlation_id": "ctl-abc_-9"})
			require.NoError(t, err)
			got, err := lifecycle.ParseControl(raw)
			require.NoError(t, err)
			assert.Equal(t, want, got)

			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, time.Hour)
				room := r.rooms[0]
				id := r.say(room, "slow")
				stop := r.run(nil)
				if mode == "play" {
					r.tap.signal("stop", "room", room.ID, "ctl-first")
					r.h.setWork(0)
				}
				r.tap.signal(mode, "agent", room.ID, "ctl-abc_-9")
				time.Sleep(5 * time.Second)
				require.NoError(t, stop())
				require.NotEmpty(t, r.h.causes(id))
				switch mode {
				case "interrupt":
					assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
					assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
				case "stop":
					assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrStopped)
					assert.Equal(t, fakeband.StatusProcessing, r.band.Status(r.agent.ID, id))
				case "play":
					assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "played: the stopped message is answered")
				}
			})
		})
	}
}

// §5.5.2
func TestARoomScopePayloadWithARoomApplies(t *testing.T) {
	c, err := lifecycle.ParseControl([]byte(`{"mode":"stop","scope":"room","agent_id":"a","room_id":"r"}`))
	require.NoError(t, err)
	assert.Equal(t, lifecycle.Control{Mode: "stop", Scope: "room", AgentID: "a", RoomID: "r"}, c)

	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, 30*time.Second)
		r.tap.signal("stop", "room", r.rooms[0].ID, "")
		r.gateQuietly(r.rooms[0], true)
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		require.Len(t, r.h.causes(ids[0]), 1)
		assert.ErrorIs(t, r.h.causes(ids[0])[0], bandonce.ErrStopped)
		assert.Equal(t, 1, r.repliesTo(r.rooms[1], bandonce.DefaultKey(ids[1])))
	})
}

// §5.5.3: mode, scope and agent id are enough; the rest is empty, and an
// agent-wide signal without a room fans out.
func TestAMinimalPayloadParsesAndFansOut(t *testing.T) {
	c, err := lifecycle.ParseControl([]byte(`{"mode":"interrupt","scope":"agent","agent_id":"a"}`))
	require.NoError(t, err)
	assert.Equal(t, lifecycle.Control{Mode: "interrupt", Scope: "agent", AgentID: "a"}, c)
	c, err = lifecycle.ParseControl([]byte(`{"mode":"interrupt","scope":"agent","agent_id":"a","room_id":null,"execution_id":null,"reason":null,"correlation_id":null}`))
	require.NoError(t, err, "explicit nulls are the same as absent fields")
	assert.Equal(t, lifecycle.Control{Mode: "interrupt", Scope: "agent", AgentID: "a"}, c)

	synctest.Test(t, func(t *testing.T) {
		r, ids, stop := twoBusyRooms(t, time.Hour)
		require.NoError(t, r.tap.pushRaw("agent.control", `{"mode":"interrupt","scope":"agent","agent_id":"`+r.agent.ID+`"}`))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		for _, id := range ids {
			require.Len(t, r.h.causes(id), 1)
			assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
		}
	})
}

// §5.5.4 and review finding (i): an unknown mode is logged as a warning
// and changes nothing; it is not an invalid payload.
func TestAnUnknownModeIsAWarningAndChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 30*time.Second)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		r.tap.signal("pause", "room", room.ID, "ctl-pause")
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.True(t, r.logs.has(slog.LevelWarn, "unknown control mode", "mode=pause"))
		assert.Empty(t, r.invalidReports())
		assert.Empty(t, r.h.causes(id))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// §5.5.5, §5.5.6, and other payloads the shell cannot use: each is
// logged with its reason, reported through Hooks.InvalidControl, and
// changes nothing.
func TestInvalidControlPayloadsAreReportedAndChangeNothing(t *testing.T) {
	cases := map[string]string{
		"unknown scope":    `{"mode":"interrupt","scope":"cluster","agent_id":"AGENT","room_id":"ROOM"}`, // §5.5.5
		"no agent id":      `{"mode":"interrupt","scope":"room","room_id":"ROOM"}`,                       // §5.5.6
		"empty agent id":   `{"mode":"interrupt","scope":"room","agent_id":"","room_id":"ROOM"}`,
		"no mode":          `{"scope":"room","agent_id":"AGENT","room_id":"ROOM"}`,
		"mode not string":  `{"mode":7,"scope":"room","agent_id":"AGENT","room_id":"ROOM"}`,
		"not an object":    `["interrupt","room"]`,
		"bare string":      `"interrupt"`,
		"null":             `null`,
		"room id a number": `{"mode":"interrupt","scope":"room","agent_id":"AGENT","room_id":12}`,
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, 30*time.Second)
				room := r.rooms[0]
				id := r.say(room, "slow")
				stop := r.run(nil)
				raw := strings.NewReplacer("AGENT", r.agent.ID, "ROOM", room.ID).Replace(payload)
				require.NoError(t, r.tap.pushRaw("agent.control", raw))
				time.Sleep(time.Minute)
				require.NoError(t, stop())

				reports := r.invalidReports()
				require.Len(t, reports, 1)
				assert.JSONEq(t, raw, reports[0].raw, "the hook gets the payload as pushed")
				assert.True(t, errors.Is(reports[0].err, lifecycle.ErrInvalidControl), "%v", reports[0].err)
				assert.True(t, r.logs.has(slog.LevelWarn, "invalid control signal", reports[0].err.Error()), "logged with the reason")
				assert.Empty(t, r.h.causes(id), "nothing was cancelled")
				assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
			})
		})
	}
}

// §5.5.8: only the agent.control event is a control signal on the
// control topic; another event with the same payload is ignored.
func TestOnlyTheAgentControlEventIsASignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 30*time.Second)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		payload := `{"mode":"interrupt","scope":"room","agent_id":"` + r.agent.ID + `","room_id":"` + room.ID + `"}`
		for _, event := range []string{"agent.interrupt", "control", "message_created"} {
			require.NoError(t, r.tap.pushRaw(event, payload))
		}
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Empty(t, r.h.causes(id))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Empty(t, r.invalidReports())
	})
}

// Origin: control-semantics.md §5.4.1 (Python link suite), §5.5.7 (Python payload suite).
// A push with every field, and one Band may add later, reaches the room as
// sent.
func TestAControlPushWithEveryFieldReachesTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, time.Hour)
		room := r.rooms[0]
		id := r.say(room, "slow")
		stop := r.run(nil)
		require.NoError(t, r.tap.pushRaw("agent.control", `{"type":"agent.control","mode":"interrupt","scope":"room",`+
			`"agent_id":"`+r.agent.ID+`","room_id":"`+room.ID+`","execution_id":"exec-1","reason":"user_requested",`+
			`"correlation_id":"ctl-full","issued_by":{"id":"someone"},"future_field":[1,2]}`))
		time.Sleep(time.Second)
		require.NoError(t, stop())
		require.Len(t, r.h.causes(id), 1)
		assert.ErrorIs(t, r.h.causes(id)[0], bandonce.ErrInterrupted)
		assert.Empty(t, r.invalidReports())
	})
}
