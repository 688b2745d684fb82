package bandtype

import (
	"fmt"
	"net/http"
	"reflect"
	"time"
)

// APIError is the error every non-2xx answer from Band becomes, whether or
// not its body was Band's JSON error envelope. Read it with errors.As:
//
//	var apiErr *band.APIError // or *bandonce.APIError
//	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity { ... }
//
// band.APIError is this type; bandonce.APIError is a type of its own with
// exactly these fields, declared there so that go doc shows them, and
// errors.As fills either from an error of the other (see As).
//
// None of its fields ever shows the agent's API key: the shell and the
// client scrub it from what the server sent before they return the error.
type APIError struct {
	// Endpoint names the call, ids templated, such as
	// "POST /agent/chats/{id}/messages".
	Endpoint string
	// Status is the HTTP status code.
	Status int
	// Code, Message and RequestID come from the error envelope
	// ({"error": {"code", "message", "request_id"}}); they are empty when
	// the body was empty or not JSON, as a load balancer's 429 or a
	// proxy's 502. RequestID falls back to the X-Request-ID header.
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

// As lets errors.As read the error as a *bandonce.APIError: the same error
// under the shell's name. It fills a target that points to a pointer of any
// type *APIError converts to, that is, a struct type declared with exactly
// APIError's fields; for any other target it reports false.
func (e *APIError) As(target any) bool {
	dst := reflect.ValueOf(target)
	if dst.Kind() != reflect.Pointer || dst.IsNil() {
		return false
	}
	dst = dst.Elem()
	from := reflect.ValueOf(e)
	if dst.Kind() != reflect.Pointer || !from.Type().ConvertibleTo(dst.Type()) {
		return false
	}
	dst.Set(from.Convert(dst.Type()))
	return true
}

// Transient reports whether the same request may succeed later: 429 and
// 5xx. Every other status is the server's final word.
func (e *APIError) Transient() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}
