package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/band-once/bandonce/internal/jsonreuse"
)

// MaxBodyExcerpt is how many bytes of an unexpected body an error keeps:
// enough to recognise an HTML error page or a proxy's message, not enough
// to carry a whole payload into logs.
const MaxBodyExcerpt = 512

// ProtocolError reports a 2xx answer the client cannot use: not JSON, no
// data member, a missing required field, a wrong type, no body where one
// was required, or a body over MaxBodyBytes. Retrying the same request
// rarely helps; it means the server and this client disagree.
type ProtocolError struct {
	// Endpoint names the call, such as "GET /agent/chats/{id}/messages/next".
	Endpoint string
	// Status is the HTTP status code of the answer.
	Status int
	// Reason says what was wrong.
	Reason string
	// Body is the start of the body, at most MaxBodyExcerpt bytes.
	Body string
}

// Error names the endpoint, the status and what was wrong.
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("band: %s: %d: protocol error: %s", e.Endpoint, e.Status, e.Reason)
}

func (r *response) protocolError(reason string) *ProtocolError {
	return &ProtocolError{Endpoint: r.endpoint, Status: r.status, Reason: reason, Body: excerpt(r.body)}
}

// decodeData checks the success envelope {"data": ...} and decodes data
// into v. It keeps data and metadata for later checks.
func (r *response) decodeData(v any) error {
	if r.status == http.StatusNoContent || len(bytes.TrimSpace(r.body)) == 0 {
		return r.protocolError("no body where data was required")
	}
	var env struct {
		Data     json.RawMessage `json:"data"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		return r.protocolError("envelope: " + err.Error())
	}
	if isAbsent(env.Data) {
		return r.protocolError("envelope has no data")
	}
	r.data, r.metadata = env.Data, env.Metadata
	return r.decodeInto(env.Data, v, "data")
}

// decodeFast decodes the envelope and its data in one pass, the cost of a
// well-formed answer. It reports false on any problem, and the caller then
// decodes step by step (decodeData), which names what was wrong; the two
// accept exactly the same bodies.
func decodeFast[T any](r *response) (*T, bool) {
	if r.status == http.StatusNoContent {
		return nil, false
	}
	var env struct {
		Data     *T              `json:"data"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if !jsonreuse.Unmarshal(r.body, &env) || env.Data == nil {
		return nil, false
	}
	r.metadata = env.Metadata
	return env.Data, true
}

// decode returns the envelope's data: in one pass when the answer is
// well formed, else step by step for a precise error.
func decode[T any](r *response) (*T, error) {
	if d, ok := decodeFast[T](r); ok {
		return d, nil
	}
	v := new(T)
	if err := r.decodeData(v); err != nil {
		return nil, err
	}
	return v, nil
}

// servedMessage is a Message whose content's presence can be checked in
// the same pass: the outer field shadows the embedded one.
type servedMessage struct {
	Message
	Content *string `json:"content"`
}

// message returns the Message if it has what the lifecycle needs.
func (s *servedMessage) message() (Message, bool) {
	if s.ID == "" || s.SenderID == "" || s.Content == nil {
		return Message{}, false
	}
	m := s.Message
	m.Content = *s.Content
	return m, true
}

// decodeInto decodes one JSON value, naming where it sits in the body.
func (r *response) decodeInto(raw []byte, v any, where string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return r.protocolError(where + ": " + err.Error())
	}
	return nil
}

func (r *response) hasMetadata() bool { return !isAbsent(r.metadata) }

// decodeMetadata decodes the envelope's metadata into v; absent metadata
// leaves v as it is.
func (r *response) decodeMetadata(v any) error {
	if !r.hasMetadata() {
		return nil
	}
	return r.decodeInto(r.metadata, v, "metadata")
}

// checkMessage enforces the fields the lifecycle cannot do without: the id
// it marks, the sender it must not answer itself, and the content, which
// may be empty but must be present.
func (r *response) checkMessage(raw []byte, m *Message, where string) error {
	var present struct {
		Content *string `json:"content"`
	}
	// raw already decoded into a Message, so it is an object.
	_ = json.Unmarshal(raw, &present)
	switch {
	case m.ID == "":
		return r.protocolError(where + ": message has no id")
	case m.SenderID == "":
		return r.protocolError(where + ": message has no sender_id")
	case present.Content == nil:
		return r.protocolError(where + ": message has no content")
	}
	return nil
}

// isAbsent reports a member that was missing or null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// excerpt returns the start of body for an error: at most MaxBodyExcerpt
// bytes, as they were.
func excerpt(body []byte) string {
	return string(body[:min(len(body), MaxBodyExcerpt)])
}

// truncateUTF8 returns s cut to at most n bytes without splitting a rune.
// Invalid bytes are replaced first, since JSON encoding would otherwise
// grow each into a three-byte U+FFFD after the length was checked.
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
