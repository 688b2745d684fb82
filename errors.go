package bandonce

import (
	"errors"
	"fmt"
	"time"

	"github.com/band-once/bandonce/bandtype"
	"github.com/band-once/bandonce/internal/keyguard"
)

// Causes a handler's context is cancelled with; read them with
// context.Cause and errors.Is.
var (
	// ErrInterrupted: Band asked to abort this cycle. Nothing the handler
	// returns is posted, and the message is consumed.
	ErrInterrupted = errors.New("bandonce: interrupted")
	// ErrStopped: Band stopped the agent in this room. Nothing is posted,
	// the message stays for replay after play.
	ErrStopped = errors.New("bandonce: stopped")
	// ErrShutdown: the shell is shutting down and the shutdown timeout ran
	// out. Nothing is marked; the message is served again after a restart.
	ErrShutdown = errors.New("bandonce: shutting down")
	// ErrSuperseded: another connection of the same agent took over. The
	// shell stops every room and Run returns this error.
	ErrSuperseded = errors.New("bandonce: superseded by another connection")
)

// ErrUnauthorized is returned by Run when Band rejects the API key. It is
// never retried.
var ErrUnauthorized = errors.New("bandonce: API key rejected")

// ErrAgentMismatch is returned by Run and Drain at start when the API key
// belongs to another agent than Config.AgentID names. Nothing is fetched.
var ErrAgentMismatch = errors.New("bandonce: the API key belongs to another agent")

// ErrCrossOriginRedirect is wrapped by the error Run and Drain end with
// when Band's REST root or socket URL answers with a redirect to another
// scheme, host or port: the API key would travel with the request, so the
// redirect is never followed, and no retry can change the configuration.
// Set Config.BaseURL and Config.SocketURL to where Band answers.
var ErrCrossOriginRedirect = keyguard.ErrCrossOriginRedirect

// ErrKeyInOutput is wrapped, with Permanent, by the error of a reply, a
// Message.Send or a Message.Event whose text, mentions, dedup key or
// metadata contain the agent's API key (raw, trimmed, URL-escaped or
// quoted): it is never sent, and a final reply that holds it is
// dead-lettered. The error, and the failure reason Band stores, do not
// quote the key.
var ErrKeyInOutput = errors.New("bandonce: the output contains the agent's API key; it is never sent to the room")

// StartError is returned by Run and Drain when Band could not be reached at
// start within Config.StartTimeout: every try of a start-up call failed
// with a connection error, a timeout, 429 or 5xx.
type StartError struct {
	// URL is the REST root the shell tried (Config.BaseURL).
	URL string
	// Call is the start-up call that kept failing, such as "GET /agent/me".
	Call string
	// Waited is how long the shell kept trying.
	Waited time.Duration
	// Err is the last failure.
	Err error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("bandonce: Band at %s did not answer %s within %s: %v", e.URL, e.Call, e.Waited.Round(time.Millisecond), e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// APIError is the error every non-2xx answer from Band becomes, whether or
// not its body was Band's JSON error envelope. Read it with errors.As:
//
//	var apiErr *bandonce.APIError
//	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity { ... }
//
// The room-tools client returns the same error as a *band.APIError (which
// is *bandtype.APIError), a type with exactly these fields: errors.As fills
// any of the three names from an error of either type, so a program uses
// whichever it imports. None of its fields ever shows the API key.
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
func (e *APIError) Error() string { return e.band().Error() }

// Transient reports whether the same request may succeed later: 429 and
// 5xx. Every other status is the server's final word.
func (e *APIError) Transient() bool { return e.band().Transient() }

// As lets errors.As read the error as a *bandtype.APIError (band.APIError):
// the same error under the client's name.
func (e *APIError) As(target any) bool {
	if p, ok := target.(**bandtype.APIError); ok {
		*p = e.band()
		return true
	}
	return false
}

// band is e as the client's type. The conversion compiles only while both
// types have the same fields, in the same order.
func (e *APIError) band() *bandtype.APIError { return (*bandtype.APIError)(e) }

// ConfigError reports an invalid Config field.
type ConfigError struct {
	// Field names the field, such as "BaseURL".
	Field string
	// Var is the environment variable ConfigFromEnv filled the field
	// from, such as "BAND_BASE_URL", or "" when the caller set it.
	Var string
	// Reason says what is wrong with it.
	Reason string
}

// Error names the variable the user set when the field came from the
// environment, and the field otherwise.
func (e *ConfigError) Error() string {
	if e.Var != "" {
		return "bandonce: invalid " + e.Var + " (Config." + e.Field + "): " + e.Reason
	}
	return "bandonce: invalid Config." + e.Field + ": " + e.Reason
}

// Permanent marks err as a failure that retrying cannot fix: the message is
// dead-lettered at once instead of after MaxAttempts.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError is the error Permanent returns.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// MaxReplyBytes bounds a reply: the JSON body of its POST (content, dedup
// marker and mentions) may take at most this many bytes. Band does not
// publish its limit; the fake Band answers a larger body with 413
// payload_too_large, and the shell refuses a larger reply before sending
// it.
const MaxReplyBytes = 1 << 20

// ReplyTooLargeError is the error for a Reply whose POST body would be
// larger than MaxReplyBytes. Nothing was posted.
type ReplyTooLargeError struct {
	// Bytes is the size the body would have had, serialized, with the
	// longest dedup marker; Max is MaxReplyBytes.
	Bytes, Max int
}

func (e *ReplyTooLargeError) Error() string {
	return fmt.Sprintf("reply is %d bytes serialized; Band takes at most %d", e.Bytes, e.Max)
}

// PanicError is the handler error a recovered panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return "handler panicked: " + panicString(e.Value) }

func panicString(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// ErrNotInTurn is returned by a Message's effects (Send, Event, Step and
// the room tools that change something) called outside the handler call
// the Message was given to: after the handler returned, or on a Message
// the shell did not deliver.
var ErrNotInTurn = errors.New("bandonce: not inside the handler's turn")
