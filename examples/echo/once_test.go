package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cron use: messages wait in three rooms; `echo -once` answers each
// exactly once and exits 0 by itself. Killed with SIGKILL halfway and
// started again, it finishes the rest without posting twice.
func TestEchoOnceDrainsAndExits(t *testing.T) {
	bin, band, base := agentWorld(t, 11)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	type waiting struct{ room, id string }
	var all []waiting
	for r := range 3 {
		room := band.AddRoom(fmt.Sprint("room ", r), ada, agent.ID)
		for i := range 3 {
			id, err := band.Say(room.ID, ada.ID, fmt.Sprintf("job %d.%d", r, i), agent.ID)
			require.NoError(t, err)
			all = append(all, waiting{room.ID, id})
		}
	}
	// The fake applies every request when it serves it, never later, so
	// a short settle window keeps each restart's wait short.
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_SETTLE_WINDOW=500ms"}
	replied := func() int {
		n := 0
		for _, w := range all {
			n += repliesTo(band, w.room, agent.ID, w.id)
		}
		return n
	}

	// Halfway: slow replies, killed once some are out and some are not.
	once := []string{"-once"}
	p := startAgentWith(t, bin, once, append(env, "ECHO_DELAY=200ms")...)
	eventually(t, "some replies out", func() bool { return replied() >= 3 })
	p.kill(t)
	require.Less(t, replied(), len(all), "killed before it finished")

	// Started again, it finishes the rest and exits by itself.
	p = startAgentWith(t, bin, once, env...)
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit 0; stderr: %s", p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("echo -once did not exit by itself")
	}
	assert.Contains(t, p.stdout.String(), "echo: drained 3 room(s)")
	assert.Empty(t, p.stderr.String())
	for _, w := range all {
		assert.Equal(t, 1, repliesTo(band, w.room, agent.ID, w.id), "message %s echoed exactly once", w.id)
		assert.Equal(t, "processed", band.Status(agent.ID, w.id))
	}
}
