package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakebandLines runs the fakeband command, as a user types it, and returns
// the "export NAME=value" lines it prints for its agent and itself.
func fakebandLines(t *testing.T) map[string]string {
	t.Helper()
	bin := buildFakeband(t)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := map[string]string{}
	scan := bufio.NewScanner(stdout)
	for scan.Scan() {
		line := scan.Text()
		if name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
			lines[name] = value
		}
		if strings.HasPrefix(line, "fakeband: ready") {
			go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(stdout) }() // keep its pipe drained
			return lines
		}
	}
	t.Fatalf("fakeband ended before it was ready: %v", scan.Err())
	return nil
}

// admin calls fakeband's admin API and decodes the answer's data.
func admin(t *testing.T, root, method, path, body string, into any) {
	t.Helper()
	req, err := http.NewRequest(method, root+"/_admin"+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "%s %s", method, path)
	if into != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&struct{ Data any }{into}))
	}
}

// runExactly starts the echo agent with env as its whole environment.
func runExactly(t *testing.T, bin string, env []string) *agentProc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = env
	return startCmd(t, cmd)
}

// Issue 11's acceptance: echo started with nothing but the lines fakeband
// prints answers, in band-once's convention (the REST root), in the
// official SDKs' (the host root), and with every line pasted at once.
func TestEchoRunsOnTheLinesFakebandPrints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband and the agent as processes")
	}
	bin := buildEcho(t)
	lines := fakebandLines(t)
	root := lines["FAKEBAND_URL"]
	require.NotEmpty(t, root)
	for _, name := range []string{"BAND_API_KEY", "BAND_AGENT_ID", "BAND_BASE_URL", "BAND_REST_URL", "BAND_WS_URL"} {
		require.NotEmpty(t, lines[name], "fakeband prints %s", name)
	}
	for convention, names := range map[string][]string{
		"REST root": {"BAND_API_KEY", "BAND_AGENT_ID", "BAND_BASE_URL", "BAND_WS_URL"},
		"host root": {"BAND_API_KEY", "BAND_AGENT_ID", "BAND_REST_URL", "BAND_WS_URL"},
		"all lines": {"BAND_API_KEY", "BAND_AGENT_ID", "BAND_BASE_URL", "BAND_REST_URL", "BAND_WS_URL"},
	} {
		t.Run(convention, func(t *testing.T) {
			var env []string
			for _, name := range names {
				env = append(env, name+"="+lines[name])
			}
			p := runExactly(t, bin, env)
			var said struct{ ID string }
			admin(t, root, http.MethodPost, "/say", `{"room": "demo", "text": "hello from `+convention+`"}`, &said)
			require.NotEmpty(t, said.ID)
			eventually(t, "the echo", func() bool {
				var truth struct {
					Rooms []struct{ Posts []struct{ Content string } }
				}
				admin(t, root, http.MethodGet, "/truth", "", &truth)
				for _, r := range truth.Rooms {
					for _, post := range r.Posts {
						if strings.HasSuffix(post.Content, "[dedup_key:echo:"+said.ID+"]") {
							return true
						}
					}
				}
				return false
			})
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, <-p.done, "SIGTERM exits 0; stderr:\n%s", p.stderr.String())
			assert.Empty(t, p.stderr.String(), "a clean run warns of nothing")
		})
	}
}

// Unreachable Band: echo warns on stderr from the first failed try, and
// after the start-up budget exits 1 with an error that names the URL.
func TestEchoGivesUpOnAnUnreachableBandNamingTheURL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process")
	}
	bin := buildEcho(t)
	base := "http://" + closedLoopbackAddr(t) + "/api/v1"
	p := runExactly(t, bin, []string{"BAND_API_KEY=" + canaryKey, "BAND_BASE_URL=" + base, "BANDONCE_START_TIMEOUT=3s"})
	var err error
	select {
	case err = <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("still running long after its 3s start-up budget; stderr:\n%s", p.stderr.String())
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr:\n%s", p.stderr.String())
	assert.Equal(t, 1, exit.ExitCode())
	stderr := p.stderr.String()
	first, _, _ := strings.Cut(stderr, "\n")
	assert.Contains(t, first, "level=WARN", "the first line is the first failed try's warning")
	assert.Contains(t, first, "start-up call failed")
	assert.Contains(t, first, "url="+base)
	assert.Contains(t, stderr, "echo: bandonce: Band at "+base+" did not answer GET /agent/me within 3s")
	assertNoTrace(t, canaryKey, stderr)
}
