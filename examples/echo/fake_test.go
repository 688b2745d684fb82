package main

import (
	"bytes"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// theStory is what `echo -fake` prints, every time: each line is told only
// once the fake Band's ground truth or the shell's outcome bears it out,
// and the counts of answers are read from the room.
const theStory = `A demo of band-once: the echo agent and ada, in one room of an in-process fake Band.

1. A message
   ada: hello
   echo answers: echo: hello

2. A crash after the post
   ada: are you still there?
   echo posts its answer, and its process dies before Band's response arrives
   a fresh echo process starts; it remembers nothing, and Band serves the message again
   its handler runs again (attempt 2); before posting, the guard reads the room,
   finds the answer there, and posts nothing: 1 answer in the room

3. An interrupt
   ada: count to a million
   echo starts working on it
   echo's operator interrupts it
   echo drops the work and posts nothing (0 answers); Band will not serve the message again

4. A stop and a play
   ada: take your time
   echo starts working on it
   ada presses stop: the work is cancelled, and the message is kept for later
   ada presses play: Band serves the message again
   echo works on it again (attempt 2) and answers: echo: take your time

The room as ada sees it. Each answer ends in the [dedup_key:...] line the guard
reads back after a crash; it is part of the message, so people see it too:
   ada  | hello
   echo | echo: hello
        | [dedup_key:echo:075c8519-e4d9-4177-8b65-000000000009]
   ada  | are you still there?
   echo | echo: are you still there?
        | [dedup_key:echo:37be58e8-e4d9-4177-8b65-00000000000b]
   ada  | count to a million
   ada  | take your time
   echo | echo: take your time
        | [dedup_key:echo:03927549-e4d9-4177-8b65-00000000000e]
`

func TestTheFakeDemoTellsTheStory(t *testing.T) {
	for run := range 3 { // the same story every time
		var out, logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		require.NoError(t, runFake(t.Context(), &out, logger), "run %d; logs:\n%s", run, logs.String())
		require.Equal(t, theStory, out.String(), "run %d", run)
		// The crashed process falls silent with its death: its severed
		// connection's failures are not logged as if it lived on.
		assert.NotContains(t, logs.String(), errCrashed.Error(), "run %d", run)
	}
}

// As users run it: the command, with nothing but -fake.
func TestEchoFakeCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command")
	}
	cmd := exec.Command(buildEcho(t), "-fake")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Equal(t, theStory, stdout.String())
	assert.Empty(t, stderr.String())
}
