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
	if f, ok := decodePlain(data); ok {
		return f, nil
	}
	return decodeJSON(data)
}

// decodePlain reads the frames peers send, without reflection: refs null,
// plain strings or runs of digits, a plain topic and event (printable
// ASCII without a quote, a backslash or <, > and &), and a payload that
// is one JSON value. It decodes them as decodeJSON does
// (FuzzDecodePlainAgreesWithJSON) and declines (false) anything else,
// which decodeJSON then reads or refuses.
func decodePlain(data []byte) (Frame, bool) {
	var f Frame
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return f, false
	}
	var fields [4]string
	for n := range fields {
		i = skipSpace(data, i+1)
		start, end, quoted, ok := plainToken(data, i)
		if !ok {
			return f, false
		}
		switch {
		case quoted:
			fields[n] = string(data[start:end])
		case n >= 2: // a topic and an event are strings
			return f, false
		case string(data[start:end]) != "null":
			fields[n] = string(data[start:end])
		}
		if quoted {
			end++
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ',' {
			return f, false
		}
	}
	if fields[2] == "" || fields[3] == "" {
		return f, false
	}
	last := len(data) - 1
	for last > i && isSpace(data[last]) {
		last--
	}
	if data[last] != ']' {
		return f, false
	}
	first := skipSpace(data, i+1)
	end := last
	for end > first && isSpace(data[end-1]) {
		end--
	}
	payload := data[first:end]
	if len(payload) >= 2*maxNesting || !json.Valid(payload) {
		// A payload nested maxNesting deep is valid alone but not one
		// level down, in the frame: decodeJSON refuses it. Nesting that
		// deep takes an opening and a closing bracket a level, so a
		// shorter payload cannot reach it.
		return f, false
	}
	f.JoinRef, f.Ref, f.Topic, f.Event = fields[0], fields[1], fields[2], fields[3]
	f.Payload = bytes.Clone(payload)
	return f, true
}

// maxNesting is encoding/json's limit on how deep a value nests.
const maxNesting = 10000

// plainToken finds the token at data[i]: a plain string, whose contents
// are data[start:end] and whose closing quote is data[end], or null or a
// run of digits, data[start:end]. ok is false for anything else.
func plainToken(data []byte, i int) (start, end int, quoted, ok bool) {
	if i >= len(data) {
		return 0, 0, false, false
	}
	if data[i] == '"' {
		for j := i + 1; j < len(data); j++ {
			switch c := data[j]; {
			case c == '"':
				return i + 1, j, true, true
			case c < 0x20 || c >= 0x7f, c == '\\', c == '<', c == '>', c == '&':
				return 0, 0, false, false
			}
		}
		return 0, 0, false, false
	}
	if len(data)-i >= 4 && string(data[i:i+4]) == "null" {
		return i, i + 4, false, true
	}
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	// JSON writes no leading zero but for 0 itself.
	if j == i || (data[i] == '0' && j-i > 1) {
		return 0, 0, false, false
	}
	return i, j, false, true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// decodeJSON decodes a frame with encoding/json: any frame decodePlain
// declines, and the errors.
func decodeJSON(data []byte) (Frame, error) {
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
