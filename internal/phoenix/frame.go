// Package phoenix speaks the Phoenix Channels protocol, serializer version
// 2.0.0, over a WebSocket: the frame codec shared by the client and the fake
// Band's server, and the client the shell uses to receive pushes.
package phoenix

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Events the protocol itself defines.
const (
	EventJoin      = "phx_join"
	EventReply     = "phx_reply"
	EventLeave     = "phx_leave"
	EventClose     = "phx_close"
	EventError     = "phx_error"
	EventHeartbeat = "heartbeat"
	TopicPhoenix   = "phoenix"
)

// MaxFrameSize bounds one decoded frame. Band's pushes are small; a frame
// this large is a broken or hostile peer, not a message.
const MaxFrameSize = 1 << 20

// Frame is one message of the V2 serializer: the JSON array
// [join_ref, ref, topic, event, payload]. JoinRef and Ref are empty when
// the wire holds null.
type Frame struct {
	JoinRef string
	Ref     string
	Topic   string
	Event   string
	Payload json.RawMessage
}

// ErrBadFrame is wrapped by every decoding failure.
var ErrBadFrame = errors.New("phoenix: bad frame")

// Encode renders f as a V2 array frame. An empty payload is sent as {}.
func Encode(f Frame) ([]byte, error) {
	payload := f.Payload
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("{}")
	}
	arr := [5]any{nullable(f.JoinRef), nullable(f.Ref), f.Topic, f.Event, payload}
	return json.Marshal(arr)
}

// Decode parses a V2 array frame. Refs may be strings, numbers or null
// (phoenix.js sends strings; other clients send numbers); they come back as
// strings. Anything else is an error wrapping ErrBadFrame, never a panic.
func Decode(data []byte) (Frame, error) {
	if len(data) > MaxFrameSize {
		return Frame{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrBadFrame, len(data), MaxFrameSize)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if len(parts) != 5 {
		return Frame{}, fmt.Errorf("%w: %d elements, want 5", ErrBadFrame, len(parts))
	}
	var f Frame
	var err error
	if f.JoinRef, err = decodeRef(parts[0]); err != nil {
		return Frame{}, fmt.Errorf("%w: join_ref: %v", ErrBadFrame, err)
	}
	if f.Ref, err = decodeRef(parts[1]); err != nil {
		return Frame{}, fmt.Errorf("%w: ref: %v", ErrBadFrame, err)
	}
	if err := json.Unmarshal(parts[2], &f.Topic); err != nil || f.Topic == "" {
		return Frame{}, fmt.Errorf("%w: topic must be a non-empty string", ErrBadFrame)
	}
	if err := json.Unmarshal(parts[3], &f.Event); err != nil || f.Event == "" {
		return Frame{}, fmt.Errorf("%w: event must be a non-empty string", ErrBadFrame)
	}
	f.Payload = parts[4]
	return f, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func decodeRef(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(raw, []byte("null")):
		return "", nil
	case len(raw) > 0 && raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			// Named, not quoted: a peer's bytes do not belong in a log.
			return "", fmt.Errorf("want string, number or null, got %s", jsonKind(raw))
		}
		return n.String(), nil
	}
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "something else"
}

// Reply is the payload of a phx_reply frame.
type Reply struct {
	Status   string          `json:"status"`
	Response json.RawMessage `json:"response"`
}
