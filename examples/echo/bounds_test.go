package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// Bounds, as users run the agent: sizes and a server's paging never stop a
// room. Each test runs echo as a process against a fake Band on loopback.

// waitFor polls cond every 10 ms for up to a minute: these tests move
// megabytes, and the machine may be loaded.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failedMarks returns the failed marks on msgID, with their reasons.
func failedMarks(band *fakeband.Band, agentID, msgID string) []fakeband.Mark {
	var out []fakeband.Mark
	for _, m := range band.Marks(agentID, msgID) {
		if m.Kind == "failed" {
			out = append(out, m)
		}
	}
	return out
}

// stopEcho ends the agent with SIGTERM and returns its stderr.
func stopEcho(t *testing.T, p *agentProc) string {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "SIGTERM exits 0; stderr: %s", p.stderr.String())
	return p.stderr.String()
}

// An LLM's code answer runs to 45 KB: sixty of them in one room make a
// /context page of 100 more than 4 MiB. The guard asks again with fewer,
// and every message is answered once.
func TestEchoAnswersSixtyMessagesOf45KBInOneRoom(t *testing.T) {
	t.Parallel() // one of the three slowest: it runs beside the others
	bin, band, base := agentWorld(t, 23)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("big", ada, agent.ID)
	var ids []string
	for i := range 60 {
		id, err := band.Say(room.ID, ada.ID, fmt.Sprintf("%02d %s", i, strings.Repeat("x", 45<<10)), agent.ID)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	p := startAgent(t, bin, "BAND_API_KEY="+agent.Key, "BAND_BASE_URL="+base)
	waitFor(t, "sixty replies", func() bool {
		for _, id := range ids {
			if band.Status(agent.ID, id) != "processed" {
				return false
			}
		}
		return true
	})
	stderr := stopEcho(t, p)
	for i, id := range ids {
		assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "message %d answered once", i)
		assert.Empty(t, failedMarks(band, agent.ID, id), "message %d", i)
	}
	assert.Empty(t, stderr, "nothing on stderr: a large page is not a failure")
	t.Logf("requests: %v", band.Requests())
}

// A message over the cap (Config.MaxResponseBytes, 4 MiB) cannot be read
// from /next: it is dead-lettered once, the reason naming its size, and the
// room goes on to the message behind it, whose guard steps over the big
// one in /context.
func TestEchoDeadLettersAMessageOverTheCapNamingItsSize(t *testing.T) {
	bin, band, base := agentWorld(t, 23)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("huge", ada, agent.ID)
	huge, err := band.Say(room.ID, ada.ID, strings.Repeat("y", 5<<20), agent.ID)
	require.NoError(t, err)
	after, err := band.Say(room.ID, ada.ID, "still there?", agent.ID)
	require.NoError(t, err)

	p := startAgent(t, bin, "BAND_API_KEY="+agent.Key, "BAND_BASE_URL="+base)
	waitFor(t, "the message behind the big one answered", func() bool { return repliesTo(band, room.ID, agent.ID, after) == 1 })
	stderr := stopEcho(t, p)

	assert.Equal(t, "processed", band.Status(agent.ID, huge), "consumed, not served for ever")
	assert.Zero(t, repliesTo(band, room.ID, agent.ID, huge))
	failed := failedMarks(band, agent.ID, huge)
	require.Len(t, failed, 1, "exactly one failed mark")
	assert.Regexp(t, regexp.MustCompile(`answer of \d{7} bytes exceeds the 4194304-byte cap`), failed[0].Error)
	assert.Contains(t, failed[0].Error, "MaxResponseBytes")
	assert.Equal(t, "processed", band.Status(agent.ID, after))
	assert.Contains(t, stderr, "giving up on a message", "the dead letter is logged")
}

// A /context whose next_cursor points at itself (a server bug, a proxy
// cache) ends the guard's read at once: one warning naming the URL, a
// bounded number of requests, and the message given up rather than the
// room looping for ever. Nothing is posted unguarded.
func TestEchoStopsOnACursorThatPointsAtItself(t *testing.T) {
	bin, band, base := agentWorld(t, 23)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("loop", ada, agent.ID)
	band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointContext, Probability: 1, Kind: fakeband.LoopCursor})
	id, err := band.Say(room.ID, ada.ID, "hello", agent.ID)
	require.NoError(t, err)

	p := startAgent(t, bin, "BAND_API_KEY="+agent.Key, "BAND_BASE_URL="+base)
	waitFor(t, "the message processed", func() bool { return band.Status(agent.ID, id) == "processed" })
	// A second message, after the first was processed, shows the room still serves.
	next, err := band.Say(room.ID, ada.ID, "and this?", agent.ID)
	require.NoError(t, err)
	waitFor(t, "the second message processed", func() bool { return band.Status(agent.ID, next) == "processed" })
	stderr := stopEcho(t, p)

	assert.Zero(t, repliesTo(band, room.ID, agent.ID, id), "never posted without the guard")
	assert.Equal(t, 4, band.Requests()[fakeband.EndpointContext], "two pages per guard read, then it stops")
	t.Logf("requests: %v", band.Requests())
	require.Len(t, failedMarks(band, agent.ID, id), 1)
	assert.Contains(t, failedMarks(band, agent.ID, id)[0].Error, "repeated a page already read")
	var warnings []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "level=WARN") {
			warnings = append(warnings, line)
		}
	}
	require.Len(t, warnings, 2, "one warning per message; stderr: %s", stderr)
	assert.Contains(t, warnings[0], "url="+base+"/agent/chats/{id}/context")
	assert.NotContains(t, stderr, agent.Key)
}

// A bolt ledger restored from an older copy (a backup taken before the
// reply) has lost the reply's record. Echo, restarted on the restored file
// after a SIGKILL between its post and its ack, checks the ledger against
// the room and does not post the reply a second time.
func TestEchoOnARestoredLedgerDoesNotDoubleAReply(t *testing.T) {
	bin, band, base := agentWorld(t, 23)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("restore", ada, agent.ID)
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "echo.ledger"), filepath.Join(dir, "backup.ledger")
	// The fake applies every request when it serves it, never later, so
	// a short settle window keeps each restart's wait short.
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_LEDGER=bolt:" + path, "BANDONCE_SETTLE_WINDOW=500ms"}

	p := startAgent(t, bin, env...)
	waitFor(t, "the ledger file", func() bool { _, err := os.Stat(path); return err == nil })
	stopEcho(t, p)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(backup, data, 0o600)) // the backup: no reply on record

	band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Kind: fakeband.Delay, Delay: time.Minute})
	id, err := band.Say(room.ID, ada.ID, "ping", agent.ID)
	require.NoError(t, err)
	p = startAgent(t, bin, env...)
	waitFor(t, "the reply", func() bool { return repliesTo(band, room.ID, agent.ID, id) == 1 })
	p.kill(t) // between the post and the ack
	band.ClearFaults()
	require.Equal(t, "processing", band.Status(agent.ID, id))

	data, err = os.ReadFile(backup)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600)) // restored: the reply's record is gone
	p = startAgent(t, bin, env...)
	waitFor(t, "the message processed", func() bool { return band.Status(agent.ID, id) == "processed" })
	stderr := stopEcho(t, p)
	assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "not doubled")
	assert.Empty(t, stderr)
}
