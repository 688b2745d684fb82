package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/internal/safebuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait in these tests.
const waitFor = 20 * time.Second

// eventually polls cond until it holds, failing the test after waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitFor, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// buildBinary compiles the package at dir (relative to this one) into a
// temporary directory; the build cache makes the second build cheap.
func buildBinary(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, dir).CombinedOutput()
	require.NoError(t, err, "go build %s: %s", dir, out)
	return bin
}

// process is a command run by a test, killed at cleanup if still running.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr safebuf.Buffer
	exited         chan struct{}
	err            error
}

func start(t *testing.T, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// stop signals the process and waits, bounded, for it to exit.
func (p *process) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.exited:
		return p.err
	case <-time.After(waitFor):
		t.Fatalf("%s did not exit within %s of %s", p.cmd.Path, waitFor, sig)
		return nil
	}
}

// fakebandProc is cmd/fakeband running as a process, with the env lines
// it printed.
type fakebandProc struct {
	*process
	env map[string]string
}

// startFakeband runs the binary and waits for it to print that it is ready.
func startFakeband(t *testing.T, bin string, args ...string) *fakebandProc {
	t.Helper()
	p := &fakebandProc{process: start(t, nil, bin, args...), env: map[string]string{}}
	eventually(t, "fakeband to print that it is ready", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("fakeband exited early: %v\nstdout: %s\nstderr: %s", p.err, p.stdout.String(), p.stderr.String())
		default:
		}
		return strings.Contains(p.stdout.String(), "fakeband: ready")
	})
	for k, v := range exportLines(p.stdout.String()) {
		p.env[k] = v
	}
	return p
}

// exportLines reads the "export NAME=value" lines of fakeband's banner;
// a later line for the same name wins.
func exportLines(out string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			if k, v, ok := strings.Cut(rest, "="); ok {
				env[k] = v
			}
		}
	}
	return env
}

// environ renders names from env as NAME=value entries.
func environ(env map[string]string, names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n+"="+env[n])
	}
	return out
}

// adminGet reads an admin API answer's data over a connection that is not
// kept alive, so no client goroutine outlives the test.
func adminGet(t *testing.T, root, path string, into any) {
	t.Helper()
	var env struct{ Data json.RawMessage }
	adminRaw(t, root, path, &env)
	require.NoError(t, json.Unmarshal(env.Data, into), "%s", env.Data)
}

// adminRaw reads a whole admin API answer, envelope included.
func adminRaw(t *testing.T, root, path string, into any) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: waitFor}
	resp, err := client.Get(root + "/_admin" + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, into), "%s", raw)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// assertServedQuietly checks what the server wrote on stderr: its
// records of serving and of stopping, in the commands' one log format
// (cmdlog), and nothing at Warn or above.
func assertServedQuietly(t *testing.T, stderr string) {
	t.Helper()
	assert.Regexp(t, `(?m)^time=\S+ level=INFO msg="fakeband: serving" url=http://\S+ seed=\d+$`, stderr)
	assert.Regexp(t, `(?m)^time=\S+ level=INFO msg="fakeband: stopped"$`, stderr)
	for line := range strings.Lines(stderr) {
		assert.Contains(t, line, " level=INFO ", "nothing alarming on stderr")
	}
}
