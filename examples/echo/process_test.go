package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// binDir holds the agent this test binary builds, once, for all its tests.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "echo-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

var builds sync.Map // package path -> *buildOnce

type buildOnce struct {
	once sync.Once
	bin  string
	out  []byte
	err  error
}

// build compiles a package of this module once per test run: every test
// (and each of -count's runs) starts the same binary.
func build(t testing.TB, pkg, name string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() {
		b.bin = filepath.Join(binDir, name)
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput()
	})
	require.NoError(t, b.err, string(b.out))
	return b.bin
}

// buildEcho compiles this command, once per test run.
func buildEcho(t testing.TB) string { return build(t, ".", "echo") }

// agentWorld builds the agent and serves a fake Band on loopback for it,
// as users run the two: separate processes talking over TCP.
func agentWorld(t testing.TB, seed int64) (bin string, band *fakeband.Band, base string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the agent as a process")
	}
	bin = buildEcho(t)
	band = fakeband.New(fakeband.Options{Seed: seed})
	t.Cleanup(func() { _ = band.Close() })
	base, err := band.Listen("127.0.0.1:0")
	require.NoError(t, err)
	return bin, band, base
}

// agentProc is the echo agent running as a separate process against a
// fake Band listening on loopback.
type agentProc struct {
	cmd    *exec.Cmd
	stdout safebuf.Buffer // read while the process writes them
	stderr safebuf.Buffer
	done   chan error    // Wait's result, once
	exited chan struct{} // closed when Wait has returned
}

func startAgent(t testing.TB, bin string, env ...string) *agentProc {
	t.Helper()
	return startAgentWith(t, bin, nil, env...)
}

// startAgentWith starts the agent with command-line args.
func startAgentWith(t testing.TB, bin string, args []string, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, cmd)
}

// startCmd starts cmd with its output captured, and kills it at the
// test's end if it still runs. The cleanup learns of the exit from a
// channel, not from cmd.ProcessState, which Wait writes on its own
// goroutine.
func startCmd(t testing.TB, cmd *exec.Cmd) *agentProc {
	t.Helper()
	p := &agentProc{cmd: cmd, done: make(chan error, 1), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait(); close(p.exited) }()
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

func (p *agentProc) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// eventually polls cond every 5 ms for up to 20 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 20*time.Second, what, cond)
}

// eventuallyWithin is eventually with a limit of its own.
func eventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func repliesTo(band *fakeband.Band, roomID, agentID, msgID string) int {
	n := 0
	for _, p := range band.Posts(roomID) {
		if p.SenderID == agentID && strings.HasSuffix(p.Content, "[dedup_key:echo:"+msgID+"]") {
			n++
		}
	}
	return n
}

// The agent as users run it: a process, SIGKILLed after a reply was posted
// but before its ack, SIGKILLed again while a handler waits, restarted each
// time, and finally stopped with SIGTERM. Every message is echoed once.
func TestEchoProcessSurvivesSIGKILLAtAwkwardMoments(t *testing.T) {
	bin, band, base := agentWorld(t, 3)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("ops", ada, agent.ID)
	var ids []string
	for i := range 6 {
		id, err := band.Say(room.ID, ada.ID, fmt.Sprint("ping ", i), agent.ID)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	// The fake applies every request when it serves it, never later, so
	// a short settle window keeps each restart's wait short.
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_SETTLE_WINDOW=500ms"}

	// 1. The second ack hangs; kill the process once its reply is out.
	band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 2, Kind: fakeband.Delay, Delay: time.Minute})
	p := startAgent(t, bin, env...)
	eventually(t, "the second reply", func() bool { return repliesTo(band, room.ID, agent.ID, ids[1]) == 1 })
	p.kill(t)
	band.ClearFaults()
	require.Equal(t, "processing", band.Status(agent.ID, ids[1]), "killed between the post and the ack")

	// 2. Slow handlers; kill while one is waiting.
	p = startAgent(t, bin, append(env, "ECHO_DELAY=300ms")...)
	eventually(t, "a handler in flight", func() bool {
		return band.Status(agent.ID, ids[3]) == "processing" && repliesTo(band, room.ID, agent.ID, ids[3]) == 0
	})
	p.kill(t)

	// 3. A clean run to the end, then a graceful stop.
	p = startAgent(t, bin, env...)
	eventually(t, "every message processed", func() bool {
		for _, id := range ids {
			if band.Status(agent.ID, id) != "processed" {
				return false
			}
		}
		return true
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "SIGTERM exits 0; stderr: %s", p.stderr.String())
	assert.Contains(t, p.stdout.String(), "echo: stopped")
	assert.Empty(t, p.stderr.String(), "nothing on stderr unless asked")

	for i, id := range ids {
		assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "message %d echoed exactly once", i)
	}
}

func TestEchoProcessExitsNonZeroOnARejectedKey(t *testing.T) {
	bin, _, base := agentWorld(t, 3)
	p := startAgent(t, bin, "BAND_API_KEY=wrong", "BAND_BASE_URL="+base)
	err := <-p.done
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, p.stderr.String(), "BAND_API_KEY was rejected")
}

// With ECHO_DELAY, an interrupt or a stop lands while the agent waits: the
// interrupted message is consumed without a reply; the stopped one is left,
// then echoed once after play.
func TestEchoProcessHonoursInterruptAndStopWhileItWaits(t *testing.T) {
	bin, band, base := agentWorld(t, 5)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("ops", ada, agent.ID)
	// -v, so the stopped cycle's line is on stderr to wait for.
	p := startAgentWith(t, bin, []string{"-v"}, "BAND_API_KEY="+agent.Key, "BAND_BASE_URL="+base, "ECHO_DELAY=30s")

	waiting := func(id string) func() bool {
		return func() bool { return band.Status(agent.ID, id) == "processing" }
	}
	first, err := band.Say(room.ID, ada.ID, "interrupt me", agent.ID)
	require.NoError(t, err)
	eventually(t, "the first handler waiting", waiting(first))
	require.NoError(t, band.Interrupt(agent.ID, ""))
	eventually(t, "the interrupted message consumed", func() bool { return band.Status(agent.ID, first) == "processed" })

	second, err := band.Say(room.ID, ada.ID, "stop me", agent.ID)
	require.NoError(t, err)
	eventually(t, "the second handler waiting", waiting(second))
	require.NoError(t, band.StopRoom(room.ID))
	eventually(t, "the stopped cycle logged", func() bool {
		return strings.Contains(p.stderr.String(), "cycle stopped; leaving the message for replay")
	})
	assert.Equal(t, "processing", band.Status(agent.ID, second), "a stopped message is left for replay")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "stderr: %s", p.stderr.String())
	require.NoError(t, band.PlayRoom(room.ID))
	// The replay is a later attempt of a message the last life began: its
	// guard waits for that life's sends to settle. The fake applies every
	// request when it serves it, so a short window keeps the wait short.
	p = startAgent(t, bin, "BAND_API_KEY="+agent.Key, "BAND_BASE_URL="+base, "BANDONCE_SETTLE_WINDOW=500ms")
	eventually(t, "the stopped message echoed after play", func() bool { return band.Status(agent.ID, second) == "processed" })
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)

	assert.Zero(t, repliesTo(band, room.ID, agent.ID, first), "nothing posted for the interrupted cycle")
	assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, second))
}
