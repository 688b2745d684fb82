package wire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Metadata is a message's metadata object, kept as the JSON it came as:
// the lifecycle reads one member of it (the dedup key of the agent's own
// posts), so decoding every message's mentions into maps would be work
// thrown away. Like the map it replaces, it accepts an object or null and
// refuses anything else.
type Metadata struct {
	raw json.RawMessage // an object; nil when absent or null
}

var errMetadataNotObject = errors.New("metadata is not an object")

// UnmarshalJSON keeps an object, or nothing for null.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		m.raw = nil
	case len(b) > 0 && b[0] == '{':
		m.raw = bytes.Clone(b)
	default:
		return errMetadataNotObject
	}
	return nil
}

// MarshalJSON writes the object as it came, or null.
func (m Metadata) MarshalJSON() ([]byte, error) {
	if m.raw == nil {
		return []byte("null"), nil
	}
	return m.raw, nil
}

// IsZero reports metadata that was absent or null.
func (m Metadata) IsZero() bool { return m.raw == nil }

// String returns the member name when it is a JSON string.
func (m Metadata) String(name string) (string, bool) {
	if m.raw == nil {
		return "", false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(m.raw, &members) != nil {
		return "", false
	}
	var s string
	if raw, ok := members[name]; !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Map decodes the whole object; nil when there is none.
func (m Metadata) Map() map[string]any {
	if m.raw == nil {
		return nil
	}
	var members map[string]any
	_ = json.Unmarshal(m.raw, &members) // an object, checked when it was read
	return members
}
