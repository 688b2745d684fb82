// Command fakeband serves the fake Band over loopback TCP, so that an agent
// written in any language can be run against it: Band's agent REST API and
// its Phoenix socket, with no keys to request, no quota, faults on demand
// and the ground truth of everything the agent did.
//
// Serving:
//
//	fakeband [serve] [-addr 127.0.0.1:0] [-scenario file.json] [-seed N]
//
// prints the cast (keys, ids, rooms) and the environment lines an agent
// needs in both conventions (BAND_API_KEY, BAND_AGENT_ID, BAND_BASE_URL
// with /api/v1 as band-once reads it, BAND_REST_URL as the host root as
// Band's official SDKs read it, BAND_WS_URL) and FAKEBAND_URL for the
// commands below, then serves until SIGINT or SIGTERM, or until the
// process that started it is gone (so a backgrounded "go run", which does
// not pass signals on, does not leave the server behind). It prints every
// key by design: it is a fake for loopback only, and its keys open nothing
// else. Without
// -scenario it serves a ready-made one: a human "ada" owning a room
// "demo" with an agent "echo". The scenario format is fakeband.Scenario;
// testdata/scenario.json is an example.
//
// Driving a running fakeband (with -url, or FAKEBAND_URL in the
// environment), each prints the admin API's JSON answer:
//
//	fakeband setup                                   who is here, with keys
//	fakeband say -room demo [-from ada] [-mention echo] text...
//	fakeband stop -room demo
//	fakeband play -room demo
//	fakeband interrupt [-agent echo] [-room demo]
//	fakeband add -room demo -participant ada [-role admin]
//	fakeband remove -room demo -participant ada
//	fakeband describe -agent echo repeats what it hears
//	fakeband drop -agent echo                        cut its sockets
//	fakeband supersede -agent echo
//	fakeband fault -endpoint post -kind lose_response -nth 1
//	fakeband fault -event agent.control -kind lose_push -nth 1
//	fakeband fault -plan '{"request": [...], "socket": [...]}'
//	fakeband rate-limit -per-second 5 -burst 10 -retry-after
//	fakeband faults                                  the active rules
//	fakeband clear-faults
//	fakeband truth                                   the ground truth, {"data": ...} as the admin API answers
//
// The admin API itself is documented at fakeband.AdminPrefix. It has no
// authentication, so fakeband only listens on loopback addresses. The same
// address serves the console at / (open it in a browser): the rooms, each
// message's life, the composer, control and faults (docs/fakeband.md).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, orphaned := withParent(ctx, os.Getppid, time.Second)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	orphaned()
	stop()
	os.Exit(code)
}

// withParent returns a context that ends when the process that started
// this one is gone, noticed by its parent process id changing (the
// orphan is handed to init or a subreaper), checked every interval. "go
// run" does not pass SIGTERM on to the program it runs, so without this
// a backgrounded "go run ./cmd/fakeband" killed with SIGTERM would leave
// the server listening. A process started by init itself is never
// orphaned. The returned func stops the watching.
func withParent(ctx context.Context, getppid func() int, interval time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	parent := getppid()
	if parent <= 1 {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if getppid() != parent {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed: an unreachable server, a refusal
	exitUsage = 2 // the command line or the scenario is wrong
)

// run dispatches to serve or to a sub-command and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "serve" || (len(args[0]) > 0 && args[0][0] == '-' && !isHelp(args[0])) {
		if len(args) > 0 && args[0] == "serve" {
			args = args[1:]
		}
		return serve(ctx, args, stdout, stderr)
	}
	if isHelp(args[0]) || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fakeband: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return cmd.run(ctx, args[0], args[1:], getenv, stdout, stderr)
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

const usage = `usage:
  fakeband [serve] [-addr 127.0.0.1:0] [-scenario file.json] [-seed N]
  fakeband <command> [-url http://127.0.0.1:PORT] [flags]   (or FAKEBAND_URL)

fakeband prints every agent's and human's key on purpose: it is a fake that
listens on loopback only, and its keys open nothing else. It stops on SIGINT,
SIGTERM, or when the process that started it (a shell, "go run") is gone.

commands:
  setup         who is here: owner, humans, agents (with keys), rooms
  say           -room R [-from H] [-mention A]... text...
  stop          -room R
  play          -room R
  interrupt     [-agent A] [-room R]
  add           -room R -participant P [-role owner|admin|member]
  remove        -room R -participant P
  describe      -agent A text...   the agent's description (GET /agent/me)
  contact-add   -agent A -participant P   (contact_added on agent_contacts)
  contact-remove -agent A -participant P  (contact_removed)
  drop          -agent A      cut the agent's sockets
  supersede     -agent A
  fault         -endpoint E -kind K [-nth N | -probability P] [...]  (or -plan JSON)
  rate-limit    -per-second N [-burst B] [-retry-after] [-empty-body]   429s per agent
  faults        the active fault rules and how often each kind fired
  clear-faults
  truth         the ground truth as the admin API answers it, {"data": ...}:
                posts, events, participants, deliveries, marks, executions,
                the change log, request counts

Run "fakeband <command> -h" for a command's flags.
`
