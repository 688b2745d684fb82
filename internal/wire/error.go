package wire

import (
	"fmt"
	"net/http"
	"time"

	"github.com/band-once/bandonce/internal/keyguard"
)

// APIError is what every non-2xx answer becomes, whether or not its body
// was the documented JSON envelope.
type APIError struct {
	// Endpoint names the call, such as "POST /agent/chats/{id}/messages".
	Endpoint string
	// Status is the HTTP status code.
	Status int
	// Code, Message and RequestID come from the error envelope; they are
	// empty when the body was empty or not JSON.
	Code      string
	Message   string
	RequestID string
	// Details holds a 422's field errors: JSON pointer to messages.
	Details map[string][]string
	// RetryAfter is the server's Retry-After hint, zero when absent.
	RetryAfter time.Duration
	// Body is the start of a body that was not the JSON envelope.
	Body string
}

// Error names the endpoint, the status, and the code and message when the
// envelope had them.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("band: %s: %d", e.Endpoint, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	s += ": " + msg
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Transient reports whether the same request may succeed later: 429 and
// 5xx. Every other status is the server's final word.
func (e *APIError) Transient() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// scrub takes the key out of every field the server filled. Body is an
// excerpt, so a key cut short at its end goes too.
func (e *APIError) scrub(key *keyguard.Secret) {
	e.Code = key.Scrub(e.Code)
	e.Message = key.Scrub(e.Message)
	e.RequestID = key.Scrub(e.RequestID)
	e.Body = key.ScrubCut(e.Body)
	if e.Details == nil {
		return
	}
	clean := make(map[string][]string, len(e.Details))
	for field, msgs := range e.Details {
		scrubbed := make([]string, len(msgs))
		for i, m := range msgs {
			scrubbed[i] = key.Scrub(m)
		}
		clean[key.Scrub(field)] = scrubbed
	}
	e.Details = clean
}
