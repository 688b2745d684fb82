package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/internal/bridge"
	"github.com/band-once/bandonce/internal/cmdlog"
	"github.com/band-once/bandonce/internal/keyguard"
)

const deadLettersUsage = `usage: bandonce deadletters list -ledger FILE
       bandonce deadletters replay -ledger FILE (-message ID | -all) [-key T] [-env NAMES] [-pass-key] -- <command> [args...]

Lists the messages an agent served by "bandonce run -ledger FILE" gave up
on, or runs the command again for them and posts each reply under the
message's own dedup key, so a replay after a crash, or a second one, answers
once. Stop the agent first: the ledger file is one process's at a time.
BAND_API_KEY (BAND_BASE_URL or BAND_REST_URL) names the agent, as for run.

flags:
`

// deadLettersMain is bandonce deadletters.
func deadLettersMain(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) int {
	getenv := lookup(environ)
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		fmt.Fprint(stderr, deadLettersUsage)
		return exitCannot
	}
	verb := args[0]
	fs := flag.NewFlagSet("bandonce deadletters "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, deadLettersUsage); fs.PrintDefaults() }
	path := fs.String("ledger", "", "the agent's ledger `file` (bandonce run -ledger)")
	message := fs.String("message", "", "replay: the `id` of the message to replay")
	all := fs.Bool("all", false, "replay: every dead letter, oldest first")
	keyTemplate := fs.String("key", "", "replay: the dedup key `template` bandonce run was given, if any")
	var env []string
	var passKey bool
	commandEnvFlags(fs, &env, &passKey)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitCannot
	}
	argv := fs.Args()
	switch {
	case *path == "":
		fmt.Fprintln(stderr, "bandonce deadletters: -ledger is required")
		return exitCannot
	case verb == "list" && (len(argv) > 0 || *message != "" || *all):
		fmt.Fprintln(stderr, "bandonce deadletters list: takes only -ledger")
		return exitCannot
	case verb == "replay" && len(argv) == 0:
		fmt.Fprintln(stderr, "bandonce deadletters replay: no command: put it after --, as for bandonce run")
		return exitCannot
	case verb == "replay" && (*message == "") == !*all:
		fmt.Fprintln(stderr, "bandonce deadletters replay: give -message ID or -all")
		return exitCannot
	}
	cfg, err := envConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce deadletters:", err)
		return exitCannot
	}
	secret := keyguard.New(cfg.APIKey)
	logger := keyguard.Logger(cmdlog.New(stderr, false), secret)
	ledger, err := openRunLedger(ctx, *path, cfg, logger)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce deadletters:", err)
		return exitFailed
	}
	defer ledger.Close()

	if verb == "list" {
		dead, err := ledger.DeadLetters(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "bandonce deadletters:", err)
			return exitFailed
		}
		printDeadLetters(stdout, dead)
		return exitOK
	}
	cmd, err := bridge.NewCommand(argv, bridge.Options{KeyTemplate: *keyTemplate, Logger: logger, Key: secret, Env: env, PassKey: passKey, Environ: environ})
	if err != nil {
		fmt.Fprintln(stderr, "bandonce deadletters:", err)
		return exitCannot
	}
	cfg.Handler, cfg.Logger, cfg.Ledger, cfg.DisableSocket = cmd.Handle, logger, ledger, true
	shell, err := bandonce.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce deadletters:", err)
		return exitCannot
	}
	dead, err := shell.DeadLetters(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce deadletters:", err)
		return exitFailed
	}
	code, found := exitOK, false
	for _, d := range dead {
		if !*all && d.MessageID != *message {
			continue
		}
		found = true
		o, err := shell.Replay(ctx, d.RoomID, d.MessageID)
		if err != nil {
			fmt.Fprintf(stdout, "%s\t%s\tfailed: %v\n", d.RoomID, d.MessageID, err)
			code = exitFailed
			continue
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", d.RoomID, d.MessageID, o.Kind)
	}
	if !found && !*all {
		fmt.Fprintf(stderr, "bandonce deadletters: no dead letter of message %s (never given up on, or replayed already)\n", *message)
		return exitFailed
	}
	return code
}

// openRunLedger opens bandonce run's ledger file for the agent the key
// belongs to.
func openRunLedger(ctx context.Context, path string, cfg bandonce.Config, logger *slog.Logger) (*boltledger.Ledger, error) {
	client, err := band.New(band.Config{APIKey: cfg.APIKey, BaseURL: cmp.Or(cfg.BaseURL, bandonce.DefaultBaseURL), Logger: logger})
	if err != nil {
		return nil, err
	}
	me, err := client.Me(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking Band who this agent is: %w", err)
	}
	return boltledger.Open(path, boltledger.Options{AgentID: me.ID})
}

// printDeadLetters writes one line per dead letter, oldest first.
func printDeadLetters(w io.Writer, dead []bandonce.DeadLetter) {
	if len(dead) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROOM\tMESSAGE\tFAILURES\tGIVEN UP\tSENDER\tBODY\tREASON")
	for _, d := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.RoomID, d.MessageID, d.Failures, d.At.Format("2006-01-02T15:04:05Z"),
			d.SenderName, excerpt(d.Body()), excerpt(d.Reason))
	}
	_ = tw.Flush()
}

// excerpt is the first line of s, at most 60 characters, tabs and all
// control characters replaced.
func excerpt(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	line = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, line)
	if utf8.RuneCountInString(line) > 60 {
		line = string([]rune(line)[:59]) + "…"
	}
	return line
}
