package fakeband

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a refusal in Band's terms: the HTTP status and error code the
// fake answers with, and what the Go methods (Say, AddParticipant, ...)
// return for the same refusal. errors.Is matches on Code, so
// errors.Is(err, ErrNotFound) holds for every not_found refusal.
type Error struct {
	Status  int
	Code    string
	Message string
	// Details maps a JSON pointer to messages; every 422 has it.
	Details map[string][]string
}

func (e *Error) Error() string {
	return fmt.Sprintf("fakeband: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; the errors returned carry a specific message.
var (
	// ErrNotFound: the room, participant, message or execution does not
	// exist or is hidden from the caller (Band hides existence).
	ErrNotFound = &Error{Status: http.StatusNotFound, Code: "not_found", Message: "not found"}
	// ErrForbidden: the caller may not do this (wrong key kind, not the owner).
	ErrForbidden = &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "forbidden"}
	// ErrStopped: the agent's execution in the room is stopped, so it may not post.
	ErrStopped = &Error{Status: http.StatusForbidden, Code: "execution_stopped", Message: "agent execution is stopped in this chat"}
	// ErrLimitReached: the plan's quota is used up (Band answers it on
	// creating rooms, messages, events and participants). The fake answers
	// it through a FailBefore fault with Status 403 and this Code.
	ErrLimitReached = &Error{Status: http.StatusForbidden, Code: "limit_reached", Message: "plan quota limit reached"}
	// ErrValidation: the request body or parameters are invalid.
	ErrValidation = &Error{Status: http.StatusUnprocessableEntity, Code: "validation_error", Message: "validation failed"}
	// ErrTooLarge: the request body is larger than the fake takes
	// (MaxBody bytes): 413 payload_too_large.
	ErrTooLarge = &Error{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large", Message: fmt.Sprintf("request body is larger than %d bytes", MaxBody)}
	// ErrNoActiveAttempt: processed or failed without an open attempt.
	ErrNoActiveAttempt = &Error{Status: http.StatusUnprocessableEntity, Code: "no_active_attempt", Message: "no active processing attempt"}
	// ErrAlreadyProcessed: processing asked for a message already processed.
	ErrAlreadyProcessed = &Error{Status: http.StatusUnprocessableEntity, Code: "already_processed", Message: "message already processed"}
)

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("fakeband: closed")

func notFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

func forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: msg}
}

// unprocessable builds a 422; pointer and detail become its one Details entry.
func unprocessable(code, msg, pointer, detail string) *Error {
	return &Error{
		Status:  http.StatusUnprocessableEntity,
		Code:    code,
		Message: msg,
		Details: map[string][]string{pointer: {detail}},
	}
}
