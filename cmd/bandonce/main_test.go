package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/internal/procgroup"
	"github.com/band-once/bandonce/internal/safebuf"
)

var binDir string

// parallel is how many tests run at once unless -parallel says. Most of
// them wait on real time (quiet periods, settle windows, leases, an
// agent's cadence) in processes that mostly sleep, so more of them run at
// once than the machine has cores.
const parallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "bandonce-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// goleak.VerifyTestMain ends the process itself, so the built
	// binaries are removed as soon as the tests have run, before its
	// leak check and exit.
	goleak.VerifyTestMain(removeAfter{m, dir})
}

// removeAfter removes the test binaries' folder once the tests have run.
type removeAfter struct {
	m   *testing.M
	dir string
}

func (r removeAfter) Run() int {
	defer os.RemoveAll(r.dir)
	return r.m.Run()
}

var builds sync.Map // package path -> *buildOnce

type buildOnce struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// build compiles a package of this module once per test run.
func build(t testing.TB, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs agents as processes")
	}
	v, _ := builds.LoadOrStore(pkg, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() {
		name := strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_")
		if name == "" {
			name = "bandonce"
		}
		b.bin = filepath.Join(binDir, name)
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput()
	})
	require.NoError(t, b.err, string(b.out))
	return b.bin
}

func bandonceBin(t testing.TB) string { return build(t, ".") }
func echoBin(t *testing.T) string     { return build(t, "../../examples/echo") }
func flawedBin(t *testing.T) string   { return build(t, "./testdata/flawed") }
func patientBin(t *testing.T) string  { return build(t, "./testdata/patient") }

// proc is a command run as a process, its output kept.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr safebuf.Buffer // read while the process writes them
	done           chan struct{}
}

func start(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited reports whether the process has exited, without waiting.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t testing.TB, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("still running after %s; stderr:\n%s", limit, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// readPids reads the pids a spawner.sh agent wrote.
func readPids(t testing.TB, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []int
	for _, f := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}

// requireAllGone fails unless every pid is gone soon (a zombie, dead but
// not reaped yet, counts as gone). The deadline is a loaded machine's,
// not a bound the test asserts.
func requireAllGone(t *testing.T, pids []int) {
	t.Helper()
	require.NotEmpty(t, pids, "the agent wrote no pids")
	deadline := time.Now().Add(20 * time.Second)
	for len(procgroup.Alive(pids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Empty(t, procgroup.Alive(pids), "processes of the agent outlived the run")
}
