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
// needs (BAND_API_KEY, BAND_BASE_URL, BAND_WS_URL) and FAKEBAND_URL for
// the commands below, then serves until SIGINT or SIGTERM. Without
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
//	fakeband drop -agent echo                        cut its sockets
//	fakeband supersede -agent echo
//	fakeband fault -endpoint post -kind lose_response -nth 1
//	fakeband fault -event agent.control -kind lose_push -nth 1
//	fakeband fault -plan '{"request": [...], "socket": [...]}'
//	fakeband faults                                  the active rules
//	fakeband clear-faults
//	fakeband truth                                   posts, deliveries, marks, events
//
// The admin API itself is documented at fakeband.AdminPrefix. It has no
// authentication, so fakeband only listens on loopback addresses.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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

commands:
  setup         who is here: owner, humans, agents (with keys), rooms
  say           -room R [-from H] [-mention A]... text...
  stop          -room R
  play          -room R
  interrupt     [-agent A] [-room R]
  drop          -agent A      cut the agent's sockets
  supersede     -agent A
  fault         -endpoint E -kind K [-nth N | -probability P] [...]  (or -plan JSON)
  faults        the active fault rules and how often each kind fired
  clear-faults
  truth         posts, deliveries, marks, executions, events, request counts

Run "fakeband <command> -h" for a command's flags.
`
