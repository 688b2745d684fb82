package pgledger

import (
	"errors"
	"fmt"
)

// Sentinels to test errors against with errors.Is.
var (
	// ErrNotPostgres: the server is not PostgreSQL, or a version older
	// than 12.
	ErrNotPostgres = errors.New("pgledger: the database is not PostgreSQL 12 or later")
	// ErrSchemaTooNew: a newer build of this package migrated the schema
	// past the versions this build knows; it refuses to read or write it.
	ErrSchemaTooNew = errors.New("pgledger: the schema was migrated by a newer build")
	// ErrForeignSchema: the schema holds tables that are not this
	// package's, or not as it made them.
	ErrForeignSchema = errors.New("pgledger: the schema is not a ledger's")
	// ErrPermission: the database user may not create or use the schema
	// and its tables.
	ErrPermission = errors.New("pgledger: no permission on the ledger's schema")

	// ErrLeaseLost is the cause RunLeader cancels the leader's context
	// with when the lease could not be renewed in time or another
	// process took it over.
	ErrLeaseLost = errors.New("pgledger: lease lost")
	// ErrFenced: a write was refused because the lease it was made
	// under is no longer current (see FencedError).
	ErrFenced = errors.New("pgledger: write fenced off")
	// ErrInvalidState: SetKey was given a state that is not a KeyState
	// constant.
	ErrInvalidState = errors.New("pgledger: invalid key state")
)

// OpenError is the error Open returns. errors.Is matches it against its
// Kind and against the cause beneath it.
type OpenError struct {
	// AgentID is the agent the caller opened the ledger for.
	AgentID string
	// Schema is the PostgreSQL schema the ledger lives in.
	Schema string
	// Kind is ErrNotPostgres, ErrSchemaTooNew, ErrForeignSchema or
	// ErrPermission, or nil for other failures (bad Options, an
	// unreachable database).
	Kind error
	// Reason says what went wrong, in words.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

func (e *OpenError) Error() string {
	msg := fmt.Sprintf("pgledger: ledger of agent %q in schema %q %s", e.AgentID, e.Schema, e.Reason)
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

// FencedError is the error a ledger write returns when the lease it was
// made under is no longer good enough to write with: another process took
// the lease over (a higher epoch), the lease ran out, or, for an intent,
// too little of it is left to post safely. errors.Is(err, ErrFenced)
// holds. Nothing was written, unless Reason says the write was committed
// and its answer came too late (an intent: harmless, since the next holder
// reads the room before posting that key).
type FencedError struct {
	// AgentID is the ledger's agent.
	AgentID string
	// Epoch is the lease epoch the write was made under.
	Epoch int64
	// Op names the refused write, e.g. "set key intent".
	Op string
	// Reason says why, in words.
	Reason string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("pgledger: %s for agent %q refused under lease epoch %d: %s", e.Op, e.AgentID, e.Epoch, e.Reason)
}

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
