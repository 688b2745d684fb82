package boltledger

import (
	"errors"
	"fmt"
)

// Sentinels to test Open's and the methods' errors against with errors.Is.
var (
	// ErrLocked: another Ledger, in this process or another, holds the
	// file's lock.
	ErrLocked = errors.New("boltledger: ledger file is locked")
	// ErrCorrupt: the file is damaged, truncated, not a bbolt database,
	// not a ledger, or of a schema version this package does not read.
	ErrCorrupt = errors.New("boltledger: ledger file is damaged or not a ledger")
	// ErrAgentMismatch: the file belongs to another agent.
	ErrAgentMismatch = errors.New("boltledger: ledger file belongs to another agent")
	// ErrClosed: the Ledger was closed.
	ErrClosed = errors.New("boltledger: ledger is closed")
	// ErrInvalidState: SetKey was given a state that is not a KeyState
	// constant.
	ErrInvalidState = errors.New("boltledger: invalid key state")
)

// OpenError is the error Open returns. errors.Is matches it against its
// Kind and against the cause beneath it.
type OpenError struct {
	// Path is the ledger file.
	Path string
	// AgentID is the agent the caller opened it for.
	AgentID string
	// Kind is ErrLocked, ErrCorrupt or ErrAgentMismatch, or nil for other
	// failures (bad Options, an I/O error).
	Kind error
	// Reason says what went wrong, in words.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

func (e *OpenError) Error() string {
	msg := fmt.Sprintf("boltledger: ledger %s %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Kind and Err, whichever are set.
func (e *OpenError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
