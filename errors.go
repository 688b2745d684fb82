package bandonce

import (
	"errors"
	"fmt"

	"github.com/band-once/bandonce/internal/wire"
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

// APIError is the error every non-2xx answer from Band becomes. Use
// errors.As to read its status, code, request id and Retry-After.
type APIError = wire.APIError

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
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
