//go:build linux

package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("PROCGROUP_SUBREAPER_HELPER") == "1" {
		subreaperHelper()
		return
	}
	if os.Getenv("PROCGROUP_RACE_HELPER") == "1" {
		raceHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

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

// subreaperHelper runs in a child test binary (the subreaper setting
// would otherwise adopt every orphan of this one): it makes an orphan in
// a live command's group, checks that ReapOrphans leaves it, kills the
// command's leader alone, and checks that ReapOrphans then reaps it.
func subreaperHelper() {
	fail := func(format string, args ...any) {
		fmt.Printf("FAIL "+format+"\n", args...)
		os.Exit(1)
	}
	if err := BecomeSubreaper(); err != nil {
		fail("BecomeSubreaper: %v", err)
	}
	dir, err := os.MkdirTemp("", "reap")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(dir)
	pidFile := filepath.Join(dir, "pid")
	p, err := Start(exec.Command("sh", "-c", `(sleep 300 & echo $! > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`); exec sleep 300`), Options{})
	if err != nil {
		fail("%v", err)
	}
	var orphan int
	for deadline := time.Now().Add(10 * time.Second); orphan == 0; {
		if data, err := os.ReadFile(pidFile); err == nil {
			orphan, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		if time.Now().After(deadline) {
			fail("no orphan")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // its subshell exits: it is ours
		if e, ok := readStat(orphan); ok && e.ppid == os.Getpid() {
			break
		}
		if time.Now().After(deadline) {
			fail("the orphan was never re-parented here")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ReapOrphans(); n != 0 || len(Alive([]int{orphan})) != 1 {
		fail("with its group's leader running, the orphan was reaped (n=%d)", n)
	}
	_ = p.Signal(syscall.SIGKILL) // the leader alone
	<-p.Done()
	if n := ReapOrphans(); n != 1 || len(Alive([]int{orphan})) != 0 {
		fail("with its group's leader dead, the orphan was not reaped (n=%d)", n)
	}

	// A daemon (a group of its own) left by a command that ended may be
	// another command's still: while one runs, it is left alone.
	other, err := Start(exec.Command("sleep", "300"), Options{})
	if err != nil {
		fail("%v", err)
	}
	daemonFile := filepath.Join(dir, "daemon")
	q, err := Start(exec.Command("sh", "-c", `setsid sh -c 'echo $$ > `+daemonFile+`.tmp; mv `+daemonFile+`.tmp `+daemonFile+`; exec sleep 300' </dev/null >/dev/null 2>&1 &`), Options{})
	if err != nil {
		fail("%v", err)
	}
	<-q.Done()
	daemon := 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		if data, err := os.ReadFile(daemonFile); err == nil && daemon == 0 {
			daemon, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		if e, ok := readStat(daemon); daemon != 0 && ok && e.ppid == os.Getpid() {
			break
		}
		if time.Now().After(deadline) {
			fail("the daemon was never re-parented here")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ReapOrphans(); n != 0 || len(Alive([]int{daemon})) != 1 {
		fail("while another command ran, a daemon was reaped (n=%d)", n)
	}
	_ = other.Signal(syscall.SIGKILL)
	<-other.Done()
	if n := ReapOrphans(); n != 1 || len(Alive([]int{daemon})) != 0 {
		fail("with no command running, the daemon was not reaped (n=%d)", n)
	}
	fmt.Println("OK")
}

func TestReapOrphansTakesWhatDeadLeadersLeftOnly(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PROCGROUP_SUBREAPER_HELPER=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "OK")
}

// raceHelper, a subreaper, starts children on four goroutines while a
// fifth reaps orphans as fast as it can, as bandonce verify does when its
// schedules run in parallel: a child Start has forked but not yet
// recorded must never be taken for an orphan.
func raceHelper() {
	if err := BecomeSubreaper(); err != nil {
		fmt.Printf("FAIL BecomeSubreaper: %v\n", err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	reaped := make(chan int)
	var passes atomic.Int64 // the reaper's finished looks
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				reaped <- n
				return
			default:
				n += ReapOrphans()
				passes.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	killed := 0
	for range 4 {
		wg.Go(func() {
			for range 50 {
				p, err := Start(exec.Command("sleep", "30"), Options{DieWithParent: true})
				if err != nil {
					fmt.Printf("FAIL start: %v\n", err)
					os.Exit(1)
				}
				// Two whole looks of the reaper's since the start, not a
				// span of the wall clock: the first may have begun before.
				for at := passes.Load(); passes.Load() < at+2; {
					time.Sleep(time.Millisecond)
				}
				if p.Exited() {
					mu.Lock()
					killed++
					mu.Unlock()
				}
				p.Kill()
			}
		})
	}
	wg.Wait()
	close(stop)
	fmt.Printf("killed %d of 200 children as orphans; reaped %d\n", killed, <-reaped)
}

func TestAChildBeingStartedIsNoOrphan(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PROCGROUP_RACE_HELPER=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "killed 0 of 200 children as orphans; reaped 0")
}

// A descendant seen while it was still in the leader's group, which made
// a session of its own afterwards and outlived the leader, is killed too:
// the leader's exit took the parent link from it and the group no longer
// holds it, so only what was tracked leads to it. (bandonce run's
// TestCancellationEndsTheWholeGroup went red on a loaded machine when a
// child was tracked between its fork and its setsid.)
func TestKillEndsATrackedDescendantThatLeftForASessionOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	fifo, pidFile := filepath.Join(dir, "go"), filepath.Join(dir, "pid")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// The child waits on the fifo before it leaves the group.
	p, err := Start(exec.Command("sh", "-c", `(read _ < `+fifo+`; exec setsid sleep 300) & echo $! > `+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+`; wait`), Options{})
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	var child int
	waitFor(t, "the child's pid", func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		return true
	})
	p.Track()
	require.Contains(t, GroupMembers(p.Pid()), child, "tracked while still in the leader's group")

	// Let it go: it leaves for a session (and a group) of its own.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("go\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	waitFor(t, "the child in a group of its own", func() bool {
		e, ok := readStat(child)
		return ok && e.pgid == child
	})

	// The leader dies alone; the child is re-parented away from it.
	require.NoError(t, p.Signal(syscall.SIGKILL))
	<-p.Done()
	require.NotContains(t, GroupMembers(p.Pid()), child)
	require.Len(t, Alive([]int{child}), 1)

	p.Kill()
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) }) // if Kill missed it
	assert.Empty(t, Alive([]int{child}), "the tracked descendant is gone when Kill returns")
}

// Track remembers a command's descendants while they live, not every one
// it ever saw: a command that runs short-lived children one after another
// (a shell loop, a build) keeps only those alive.
func TestTrackForgetsDescendantsThatAreGone(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", "while :; do sleep 0.01; done"), Options{})
	require.NoError(t, err)
	defer p.Kill()
	seen := map[int]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(seen) < 20; {
		require.True(t, time.Now().Before(deadline), "the loop made %d children", len(seen))
		p.Track()
		for _, e := range descendants(p.Pid()) {
			seen[e.pid] = true
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Track()
	p.mu.Lock()
	n := len(p.known)
	p.mu.Unlock()
	assert.LessOrEqual(t, n, 2, "%d children seen, %d remembered", len(seen), n)
}
