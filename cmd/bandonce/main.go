// Command bandonce brings band-once's guarantees to agents that are not
// written in Go.
//
//	bandonce verify [flags] -- <command> [args...]
//	bandonce run [flags] -- <command> [args...]
//	bandonce run -forward https://host/path [flags]
//	bandonce deadletters list|replay -ledger FILE [flags] [-- <command>]
//
// grades any agent that runs as a process: it serves a fake Band on
// loopback, starts the command with the environment Band's SDKs read
// (BAND_API_KEY, BAND_AGENT_ID, BAND_BASE_URL, BAND_REST_URL, BAND_WS_URL,
// and the THENVOI_* equivalents; none of its own BAND_*, THENVOI_* or
// URL-off-loopback variables),
// and drives seeded schedules against it: SIGKILL of its whole process
// group at a chosen request and a restart, lost answers, 429 and 5xx
// bursts, socket drops, interrupt, stop and play, supersede, and SIGTERM
// at the end. It judges every schedule from the fake's ground truth and
// prints a receipt; on a violation, the rule, the seed, a one-clause
// reason, the schedule shrunk to a minimal witness and the command that
// replays it. Exit status: 0 held, 1 violated, 2 could not run. With
// -replicas N it runs N copies of the command at once as replicas of one
// agent on a PostgreSQL database of each schedule's own (BANDONCE_LEDGER;
// the server from -postgres, $BANDONCE_TEST_POSTGRES, or a throwaway one it
// starts), kills, pauses and hands over the holder, judges that a replica
// taken over from sends nothing more, and reports failover times.
//
// run turns any program into a Band agent with everything the Shell
// guarantees: one run of the command per message (the body on stdin, the
// message in BAND_MESSAGE_ID, BAND_ROOM_ID, BAND_SENDER_ID, BAND_ATTEMPT and
// BAND_DEDUP_KEY, the reply on stdout), or one POST per message to a URL.
// The command gets a minimal environment (-env adds names) and the agent's
// key only with -pass-key; a reply that holds the key is never posted.
// An interrupt, a stop, a -timeout or shutdown ends the command's whole
// process group (SIGTERM, SIGKILL after -grace), or aborts the POST and
// sends the remote a cancel call. Exit status: 0 after SIGINT or SIGTERM
// and a graceful drain, 1 for a rejected key or a superseded connection,
// 2 for bad usage.
//
// deadletters lists what an agent served by run -ledger FILE gave up on,
// and replays it: the command runs again for the stored message and its
// reply is posted under the message's own dedup key, once.
//
// See docs/bandonce.md for the rules, the flags and the attribution of
// replies.
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
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK       = 0
	exitViolated = 1 // verify: a rule was broken
	exitFailed   = 1 // run: the key was rejected, or another connection took over
	exitCannot   = 2 // verify: no verdict (command missing, never connected, interrupted); bad usage
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitCannot
	}
	switch args[0] {
	case "verify":
		return verifyMain(ctx, args[1:], stdout, stderr)
	case "run":
		return runMain(ctx, args[1:], os.Environ(), stderr)
	case "deadletters":
		return deadLettersMain(ctx, args[1:], os.Environ(), stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "bandonce: unknown command %q\n\n%s", args[0], usage)
	return exitCannot
}

const usage = `usage:
  bandonce verify [flags] -- <command> [args...]   grade an agent process with the kill-storm
  bandonce run [flags] -- <command> [args...]      run a command per message, exactly once
  bandonce run -forward URL [flags]                POST each message to URL, exactly once
  bandonce deadletters list -ledger FILE           the messages run -ledger FILE gave up on
  bandonce deadletters replay -ledger FILE (-message ID | -all) -- <command>   answer them again, once

Run "bandonce verify -h" or "bandonce run -h" for the flags; docs/bandonce.md has the details.
`
