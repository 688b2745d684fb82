//go:build linux

package procgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// family starts a shell that starts two sleeps, one in its own session
// (and so its own process group), writes every pid to a file and waits.
func family(t *testing.T, trap string) (*Process, []int) {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	script := trap + `
sleep 300 & a=$!
setsid sleep 300 & b=$!
echo $$ $a $b > ` + pids + `.tmp && mv ` + pids + `.tmp ` + pids + `
wait`
	p, err := Start(exec.Command("sh", "-c", script), Options{})
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	var out []int
	waitFor(t, "the pid file", func() bool {
		data, err := os.ReadFile(pids)
		if err != nil {
			return false
		}
		out = nil
		for _, f := range strings.Fields(string(data)) {
			n, err := strconv.Atoi(f)
			require.NoError(t, err)
			out = append(out, n)
		}
		return len(out) == 3
	})
	return p, out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestKillEndsTheGroupAndDescendantsThatLeftIt(t *testing.T) {
	p, pids := family(t, "")
	require.Equal(t, p.Pid(), pids[0])
	assert.Len(t, Alive(pids), 3)
	assert.Contains(t, GroupMembers(p.Pid()), pids[1], "the plain child shares the leader's group")
	assert.NotContains(t, GroupMembers(p.Pid()), pids[2], "the setsid child has a group of its own")

	p.Kill()
	require.True(t, p.Exited())
	assert.Equal(t, -1, p.ExitCode())
	assert.Equal(t, "signal: killed", p.ExitString())
	waitFor(t, "every pid gone", func() bool { return len(Alive(pids)) == 0 })
	p.Kill() // again: harmless
}

func TestTerminateLetsAGracefulLeaderExitAndKillsWhatItLeft(t *testing.T) {
	// The leader exits 0 on SIGTERM; its children ignore SIGTERM and must
	// be killed anyway.
	p, pids := family(t, `trap 'exit 0' TERM`)
	killed := p.Terminate(5 * time.Second)
	assert.False(t, killed, "the leader exited within the grace")
	assert.Equal(t, 0, p.ExitCode())
	waitFor(t, "every pid gone", func() bool { return len(Alive(pids)) == 0 })
}

func TestTerminateKillsALeaderThatIgnoresSIGTERM(t *testing.T) {
	p, pids := family(t, `trap '' TERM`)
	start := time.Now()
	killed := p.Terminate(200 * time.Millisecond)
	assert.True(t, killed)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	waitFor(t, "every pid gone", func() bool { return len(Alive(pids)) == 0 })
}

func TestStartRefusesAMissingCommand(t *testing.T) {
	_, err := Start(exec.Command("/nonexistent/agent"), Options{})
	require.Error(t, err)
}

func TestReapOrphansLeavesOthersChildrenAloneUnlessSubreaper(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	assert.Zero(t, ReapOrphans(), "not a subreaper: a child Start did not launch is not an orphan")
	assert.Len(t, Alive([]int{cmd.Process.Pid}), 1)
}
