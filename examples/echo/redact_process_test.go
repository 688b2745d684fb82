package main

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// canaryKey is recognisable in any output.
const canaryKey = "band_a_L3AKC4NARY0123456789abcdef"

// startVerbose runs the agent with -v, its stderr readable as it runs.
func startVerbose(t *testing.T, bin string, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(bin, "-v")
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, cmd)
}

func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// assertNoTrace fails if stderr holds the key or the start of its secret
// part.
func assertNoTrace(t *testing.T, key, stderr string) {
	t.Helper()
	for _, trace := range []string{key, key[7:17]} {
		assert.NotContains(t, stderr, trace, "stderr:\n%s", stderr)
	}
}

// Issue 18 as it was found: `echo -v` with BAND_WS_URL where nothing
// listens logged the key in every "connect failed". Here it runs against
// unreachable REST and socket URLs, and against a reachable REST with an
// unreachable socket, until each failure has been logged a few times,
// then stops on SIGTERM; its stderr holds no trace of the key.
func TestEchoProcessLogsNoKeyWhenBandIsUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process")
	}
	bin := buildEcho(t)
	band := fakeband.New(fakeband.Options{Seed: 18})
	t.Cleanup(func() { _ = band.Close() })
	agent := band.AddAgent("echo")
	base, err := band.Listen("127.0.0.1:0")
	require.NoError(t, err)
	deadSocket := "ws://" + closedLoopbackAddr(t) + "/api/v1/socket/websocket"

	for name, tc := range map[string]struct {
		key, base, want string
	}{
		"REST and socket unreachable": {canaryKey, "http://" + closedLoopbackAddr(t) + "/api/v1", "start-up call failed"},
		"socket unreachable":          {agent.Key, base, "phoenix: connect failed"},
	} {
		t.Run(name, func(t *testing.T) {
			p := startVerbose(t, bin, "BAND_API_KEY="+tc.key, "BAND_BASE_URL="+tc.base, "BAND_WS_URL="+deadSocket)
			eventually(t, "the failure logged three times", func() bool { return strings.Count(p.stderr.String(), tc.want) >= 3 })
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, <-p.done, "SIGTERM exits 0; stderr:\n%s", p.stderr.String())
			assertNoTrace(t, tc.key, p.stderr.String())
		})
	}
}

// A plain http URL to a host that is not loopback is refused before any
// request: the message says why, and does not show the key either.
func TestEchoProcessRefusesPlaintextToTheNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process")
	}
	bin := buildEcho(t)
	p := startVerbose(t, bin, "BAND_API_KEY="+canaryKey, "BAND_BASE_URL=http://band.example/api/v1")
	var err error
	select {
	case err = <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("still running: the URL was not refused; stderr:\n%s", p.stderr.String())
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, p.stderr.String(), "the API key would cross the network in clear")
	assertNoTrace(t, canaryKey, p.stderr.String())
}
