package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// truth is the part of the admin API's ground truth these tests read.
type truth struct {
	Rooms []struct {
		ID           string
		Title        string
		Participants []struct{ Name string }
		Posts        []struct {
			Seq        int
			ID         string
			SenderID   string `json:"sender_id"`
			SenderType string `json:"sender_type"`
			Content    string
		}
	}
	Deliveries []struct {
		RecipientID string `json:"recipient_id"`
		MessageID   string `json:"message_id"`
		Status      string
	}
	Executions []struct {
		AgentID string `json:"agent_id"`
		Stopped bool
	}
	Marks []struct {
		Seq       int
		MessageID string `json:"message_id"`
		Kind      string
	}
	Events []struct {
		Seq  int
		Kind string
	}
	FaultsFired map[string]int `json:"faults_fired"`
}

// echoesOf counts the agent's replies carrying the echo agent's dedup key
// for the message.
func (tr truth) echoesOf(messageID string) int {
	n := 0
	for _, r := range tr.Rooms {
		for _, p := range r.Posts {
			if p.SenderType == "Agent" && strings.HasSuffix(p.Content, "[dedup_key:echo:"+messageID+"]") {
				n++
			}
		}
	}
	return n
}

func (tr truth) status(messageID string) string {
	for _, d := range tr.Deliveries {
		if d.MessageID == messageID {
			return d.Status
		}
	}
	return ""
}

// fakebandCLI runs a fakeband sub-command against the server, as a user
// would, and returns its output.
func fakebandCLI(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"FAKEBAND_URL=" + url}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "fakeband %v: %s", args, stderr.String())
	assert.Empty(t, stderr.String(), "fakeband %v writes nothing on stderr", args)
	return string(out)
}

// sayID posts through the CLI and returns the new message's id.
func sayID(t *testing.T, bin, url, text string) string {
	t.Helper()
	out := fakebandCLI(t, bin, url, "say", "-room", "demo", text)
	var said struct{ ID string }
	require.NoError(t, jsonUnmarshal(out, &said), out)
	require.NotEmpty(t, said.ID, out)
	return said.ID
}

// The acceptance test of issue 7: fakeband and the echo agent as separate
// processes, wired only through the env lines fakeband prints; a
// conversation, a lost response, and a stop/play driven through the
// fakeband commands; and the ground truth: every message echoed once.
func TestEchoAgentAgainstFakebandProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband and the echo agent as processes")
	}
	fakebandBin := buildBinary(t, ".", "fakeband")
	echoBin := buildBinary(t, "../../examples/echo", "echo")

	band := startFakeband(t, fakebandBin, "-addr", "127.0.0.1:0")
	url := band.env["FAKEBAND_URL"]
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), "loopback: %q", url)
	for _, name := range []string{"BAND_API_KEY", "BAND_BASE_URL", "BAND_WS_URL"} {
		require.NotEmpty(t, band.env[name], "fakeband printed %s", name)
	}
	// The lost response below leaves a send of unknown outcome, which the
	// agent re-checks once it has settled; fakeband applies nothing late
	// here, so a short settle window keeps that wait short.
	agentEnv := append(environ(band.env, "BAND_API_KEY", "BAND_BASE_URL", "BAND_WS_URL"), "BANDONCE_SETTLE_WINDOW=500ms")
	echo := start(t, agentEnv, echoBin)
	read := func() truth {
		var tr truth
		adminGet(t, url, "/truth", &tr)
		return tr
	}
	echoed := func(ids ...string) func() bool {
		return func() bool {
			tr := read()
			for _, id := range ids {
				if tr.status(id) != "processed" || tr.echoesOf(id) == 0 {
					return false
				}
			}
			return true
		}
	}

	// A conversation.
	var ids []string
	for i := range 3 {
		ids = append(ids, sayID(t, fakebandBin, url, fmt.Sprint("hello ", i)))
	}
	eventually(t, "the conversation to be echoed", echoed(ids...))

	// The agent's next post is applied but its response lost.
	fakebandCLI(t, fakebandBin, url, "fault", "-endpoint", "post", "-kind", "lose_response", "-nth", "1")
	lost := sayID(t, fakebandBin, url, "lost once")
	ids = append(ids, lost)
	eventually(t, "the message whose reply lost its response", echoed(lost))
	assert.Equal(t, 1, read().FaultsFired["post/lose_response"], "the fault fired")
	fakebandCLI(t, fakebandBin, url, "clear-faults")

	// Stopped: messages wait; played: they are answered.
	fakebandCLI(t, fakebandBin, url, "stop", "-room", "demo")
	waiting := []string{sayID(t, fakebandBin, url, "while stopped 1"), sayID(t, fakebandBin, url, "while stopped 2")}
	ids = append(ids, waiting...)
	tr := read()
	require.Len(t, tr.Executions, 1)
	assert.True(t, tr.Executions[0].Stopped)
	fakebandCLI(t, fakebandBin, url, "play", "-room", "demo")
	eventually(t, "the messages sent while stopped to be echoed after play", echoed(waiting...))

	require.NoError(t, echo.stop(t, syscall.SIGTERM), "echo exits 0 on SIGTERM; stderr: %s", echo.stderr.String())
	// echo warns on stderr: of the one fault injected, the lost response, and of nothing else.
	for line := range strings.Lines(echo.stderr.String()) {
		assert.Contains(t, line, "outcome unknown; re-checking the room once it has settled")
		assert.Contains(t, line, "level=WARN")
	}

	// The ground truth, read through the CLI as a user would.
	var final truth
	require.NoError(t, unwrapData(fakebandCLI(t, fakebandBin, url, "truth"), &final))
	for i, id := range ids {
		assert.Equal(t, 1, final.echoesOf(id), "message %d echoed exactly once", i)
		assert.Equal(t, "processed", final.status(id), "message %d processed", i)
	}
	var humans, agents int
	for _, p := range final.Rooms[0].Posts {
		if p.SenderType == "User" {
			humans++
		} else {
			agents++
		}
	}
	assert.Equal(t, len(ids), humans)
	assert.Equal(t, len(ids), agents, "one reply per message, no more")

	// Nothing was touched while stopped: every mark on the waiting
	// messages comes after the play.
	play := 0
	for _, e := range final.Events {
		if e.Kind == "play" {
			play = e.Seq
		}
	}
	require.Positive(t, play)
	for _, m := range final.Marks {
		if m.MessageID == waiting[0] || m.MessageID == waiting[1] {
			assert.Greater(t, m.Seq, play, "mark %s on a message sent while stopped came before play", m.Kind)
		}
	}

	require.NoError(t, band.stop(t, syscall.SIGINT), "fakeband exits 0 on SIGINT")
	assertServedQuietly(t, band.stderr.String())
}
