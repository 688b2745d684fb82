package phoenix

import "errors"

// Reasons the client closes a connection itself. They reach
// OnDisconnected and can be tested with errors.Is.
var (
	// ErrHeartbeatTimeout: a heartbeat was still unanswered when the next
	// one was due.
	ErrHeartbeatTimeout = errors.New("phoenix: heartbeat not answered within one interval")
	// ErrJoinTimeout: a join was still unanswered a full heartbeat
	// interval after it was sent.
	ErrJoinTimeout = errors.New("phoenix: join not answered within one heartbeat interval")
	// ErrConnectionLost wraps a read or write failure on the socket,
	// including the server closing it.
	ErrConnectionLost = errors.New("phoenix: connection lost")
)

// Misuse reported by Run before it connects.
var (
	// ErrAlreadyRunning is returned by Run while another Run is active.
	ErrAlreadyRunning = errors.New("phoenix: Run already active")
	// ErrBadURL is returned by Run when Config.URL cannot be dialled.
	ErrBadURL = errors.New("phoenix: bad socket URL")
)
