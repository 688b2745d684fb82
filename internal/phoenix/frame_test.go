package phoenix_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/phoenix"
)

func TestDecodeAcceptsStringNumberAndNullRefs(t *testing.T) {
	f, err := phoenix.Decode([]byte(` ["3", 4, "agent_control:a", "agent.control", {"mode":"stop"}] `))
	require.NoError(t, err)
	assert.Equal(t, phoenix.Frame{JoinRef: "3", Ref: "4", Topic: "agent_control:a", Event: "agent.control", Payload: json.RawMessage(`{"mode":"stop"}`)}, f)

	f, err = phoenix.Decode([]byte(`[null,null,"t","e",null]`))
	require.NoError(t, err)
	assert.Empty(t, f.JoinRef)
	assert.Empty(t, f.Ref)
	assert.Equal(t, "null", string(f.Payload))
}

func TestDecodeRejectsMalformedFramesWithErrBadFrame(t *testing.T) {
	for _, bad := range []string{
		``, `null`, `{}`, `"x"`, `[]`, `[null,null,"t","e"]`, `[null,null,"t","e",{},1]`,
		`[true,null,"t","e",{}]`, `[null,[],"t","e",{}]`, `[null,null,"","e",{}]`, `[null,null,"t","",{}]`,
		`[null,null,1,"e",{}]`, `[null,null,"t",null,{}]`, `[null,null,"t","e",{]`,
		`[null,null,"t","e",{}]` + strings.Repeat(" ", phoenix.MaxFrameSize),
	} {
		_, err := phoenix.Decode([]byte(bad))
		assert.ErrorIs(t, err, phoenix.ErrBadFrame, "%.40q", bad)
	}
}

func TestEncodeWritesNullRefsAndDefaultsThePayload(t *testing.T) {
	b, err := phoenix.Encode(phoenix.Frame{Ref: "7", Topic: phoenix.TopicPhoenix, Event: phoenix.EventHeartbeat})
	require.NoError(t, err)
	assert.JSONEq(t, `[null,"7","phoenix","heartbeat",{}]`, string(b))

	_, err = phoenix.Encode(phoenix.Frame{Topic: "t", Event: "e", Payload: json.RawMessage(`{bad`)})
	assert.Error(t, err)
}

// FuzzDecode checks that no input panics Decode, that every failure wraps
// ErrBadFrame, and that whatever decodes survives Encode and Decode again.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`["1","1","agent_control:a","phx_join",{}]`,
		`[null,"2","phoenix","heartbeat",{}]`,
		`["1","2","chat_room:r","phx_reply",{"status":"ok","response":{}}]`,
		`[1,2,"t","e",[1,2,3]]`,
		`[null,null,"t","e","<&>\u2028"]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := phoenix.Decode(data)
		if err != nil {
			require.ErrorIs(t, err, phoenix.ErrBadFrame)
			return
		}
		require.NotEmpty(t, fr.Topic)
		require.NotEmpty(t, fr.Event)
		encoded, err := phoenix.Encode(fr)
		require.NoError(t, err)
		again, err := phoenix.Decode(encoded)
		require.NoError(t, err)
		assert.Equal(t, fr.JoinRef, again.JoinRef)
		assert.Equal(t, fr.Ref, again.Ref)
		assert.Equal(t, fr.Topic, again.Topic)
		assert.Equal(t, fr.Event, again.Event)
		// Encode compacts the payload and escapes HTML, nothing else.
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, fr.Payload))
		var escaped bytes.Buffer
		json.HTMLEscape(&escaped, want.Bytes())
		assert.Equal(t, escaped.String(), string(again.Payload))
	})
}
