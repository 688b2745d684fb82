package main

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/safebuf"
)

// A backgrounded "go run ./cmd/fakeband" killed with SIGTERM: the go
// command exits without passing the signal on, and the server, orphaned,
// must notice and stop instead of listening on.
func TestServerStopsWhenGoRunIsTerminated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command through go run")
	}
	cmd := exec.Command("go", "run", ".", "-addr", "127.0.0.1:0")
	// Its own process group, so that cleanup can end the server too if the
	// test fails while it still runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr safebuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed by a signal, by design
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the group this test started
		select {
		case <-exited:
		case <-time.After(waitFor):
		}
	})

	deadline := time.Now().Add(3 * waitFor) // go run may compile first
	for !strings.Contains(stdout.String(), "fakeband: ready") {
		require.True(t, time.Now().Before(deadline), "fakeband never got ready; stderr: %s", stderr.String())
		time.Sleep(20 * time.Millisecond)
	}
	url := exportLines(stdout.String())["FAKEBAND_URL"]
	require.NotEmpty(t, url)
	require.NoError(t, probe(url), "the server answers while go run lives")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM), "SIGTERM to the go command alone, as kill %%1 would")
	select {
	case <-exited:
	case <-time.After(waitFor):
		t.Fatal("go run did not exit on SIGTERM")
	}
	eventually(t, "the orphaned server to stop listening", func() bool {
		err := probe(url)
		return errors.Is(err, syscall.ECONNREFUSED)
	})
}

func probe(root string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/_admin/setup", nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// withParent ends its context when the parent process id changes, and
// only then; a process whose parent is init is never watched.
func TestWithParentEndsWhenOrphaned(t *testing.T) {
	// The watcher's looks are counted: a few of them, not a span of the
	// wall clock, are what the assertions of absence wait for.
	var ppid, looks atomic.Int64
	ppid.Store(4242)
	getppid := func() int { looks.Add(1); return int(ppid.Load()) }
	ctx, stop := withParent(context.Background(), getppid, time.Millisecond)
	defer stop()
	eventually(t, "the watcher looking at its parent thrice", func() bool { return looks.Load() >= 3 })
	require.NoError(t, ctx.Err(), "the parent is still there")
	ppid.Store(1)
	select {
	case <-ctx.Done():
	case <-time.After(waitFor):
		t.Fatal("the orphan was not noticed")
	}

	looks.Store(0)
	ctx, stop = withParent(context.Background(), func() int { looks.Add(1); return 1 }, time.Millisecond)
	eventually(t, "the watcher looking at its parent", func() bool { return looks.Load() >= 1 })
	assert.NoError(t, ctx.Err(), "started by init: nothing to watch")
	stop()
	assert.Error(t, ctx.Err(), "stop ends the context")
}
