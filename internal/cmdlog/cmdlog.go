// Package cmdlog is the one log format of the project's commands
// (bandonce, fakeband): log/slog's text records on stderr, at Info, or at
// Debug when the user asks for everything, so that a person running both
// reads one kind of line; and the bounded readers of what the commands
// they run write (ReadLines, ReadReply), which read a pipe to its end
// whatever it holds, so the writer never blocks and no line grows without
// bound.
package cmdlog

import (
	"io"
	"log/slog"
)

// New returns the logger a command writes its records to w with.
func New(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
