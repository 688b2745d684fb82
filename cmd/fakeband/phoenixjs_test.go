package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// phoenixJSDir holds the Node check of the socket against the official
// phoenix client; its node_modules are installed by hand (npm ci), never by
// the test, so CI does not depend on npm.
const phoenixJSDir = "testdata/phoenixjs"

// The official phoenix JavaScript client connects to fakeband, joins every
// topic Band's official SDKs join, receives agent.control pushes,
// message_created, participant and room events, survives heartbeat cycles
// and leaves.
func TestOfficialPhoenixJSClientSpeaksToFakeband(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband and node as processes")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH, so the socket was NOT checked against the official phoenix JavaScript client")
	}
	for _, pkg := range []string{"phoenix", "ws"} {
		if _, err := os.Stat(filepath.Join(phoenixJSDir, "node_modules", pkg, "package.json")); err != nil {
			t.Skipf("%s/node_modules/%s is not installed, so the socket was NOT checked against the official phoenix "+
				"JavaScript client; run `npm ci` in cmd/fakeband/%s to enable this test", phoenixJSDir, pkg, phoenixJSDir)
		}
	}
	band := startFakeband(t, buildBinary(t, ".", "fakeband"))

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	check := exec.CommandContext(ctx, node, "check.mjs")
	check.Dir = phoenixJSDir
	check.Env = append(os.Environ(), environ(band.env, "BAND_API_KEY", "BAND_REST_URL", "BAND_WS_URL", "FAKEBAND_URL")...)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "node check.mjs:\n%s", out)
	assert.Contains(t, string(out), "PASS: phoenix ")
	assert.NotContains(t, string(out), "FAIL")
	for _, step := range []string{
		"joined agent_control:", "joined agent_rooms:", "joined room_participants:", "joined agent_contacts:",
		"stop: agent.control", "play: agent.control", "interrupt: agent.control", "message_created",
		"add the operator: participant_added", "remove the operator: participant_removed",
		"remove the agent: room_removed", "add a contact: contact_added", "remove the contact: contact_removed",
		"add the agent back: room_added", "left agent_control:",
	} {
		assert.Contains(t, string(out), "ok: "+step, "step %q", step)
	}
	assert.Regexp(t, `(?m)^ok: \d+ heartbeats answered every 100 ms; still connected$`, string(out))
	t.Logf("node check.mjs:\n%s", strings.TrimSpace(string(out)))
	require.NoError(t, band.stop(t, syscall.SIGTERM), "fakeband exits 0 on SIGTERM")
	assertServedQuietly(t, band.stderr.String())
}
