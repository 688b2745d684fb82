// Command echo is a complete Band agent built on band-once: it answers
// every message that mentions it with "echo: <text>", mentioning the
// sender, exactly once.
//
// Configuration comes from the environment, read by bandonce.ConfigFromEnv,
// so the lines `fakeband` prints can be pasted as they are
// (docs/configuration.md):
//
//	BAND_API_KEY   the agent's API key (required)
//	BAND_BASE_URL  the REST root, with /api/v1 (default https://app.band.ai/api/v1)
//	BAND_REST_URL  or the host root, as Band's official SDKs read it
//	BAND_WS_URL    the Phoenix socket (default derived from the REST root)
//	BAND_AGENT_ID  the agent's id, checked against Band's answer at start (optional)
//	BANDONCE_START_TIMEOUT  how long to try to reach Band at start (default 2m)
//	ECHO_DELAY     a Go duration each reply waits, to stand in for slow work (default 0)
//	BANDONCE_LEDGER      where the ledger lives: empty for memory (lost on exit),
//	                     bolt:PATH for a file on this host, or a postgres:// URL
//	                     shared by every replica: one serves, the others stand by
//	                     (docs/ledgers.md)
//	BANDONCE_LEASE_TIME  with postgres://, how long the standbys wait for a silent
//	                     holder before one takes over (default 10s)
//
// Warnings and errors go to stderr; -v adds what the shell does, down to a
// line per message.
//
// SIGINT or SIGTERM shut it down gracefully (exit 0). A rejected key, or
// another connection of the same agent taking over, exits 1 with a message
// saying so. With -once it answers what is waiting in every room and exits
// by itself, 0 when every room was drained (for cron: see Shell.Drain). With -fake it runs a short scripted conversation against the
// in-process fake Band and prints it; no key or network is needed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/band-once/bandonce"
)

func main() {
	fake := flag.Bool("fake", false, "run a scripted conversation on the in-process fake Band and print it")
	verbose := flag.Bool("v", false, "log what the shell does to stderr")
	once := flag.Bool("once", false, "answer what is waiting in every room, then exit")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	level := slog.LevelWarn // stdout says what it does; stderr is for trouble
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var err error
	if *fake {
		if !*verbose {
			logger = slog.New(slog.DiscardHandler)
		}
		err = runFake(ctx, os.Stdout, logger)
	} else {
		err = run(ctx, os.Getenv, os.Stdout, logger, *once)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// run serves the agent named by the environment until ctx ends, or with
// once until every room is drained.
func run(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger, once bool) error {
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	delay, err := parseDelay(getenv("ECHO_DELAY"))
	if err != nil {
		return err
	}
	cfg.Handler = Echo(delay)
	cfg.Logger = logger
	if _, err := bandonce.New(cfg); err != nil { // a bad setting fails now, not once a lease is held
		return err
	}
	if once {
		return runWithLedger(ctx, getenv, logger, cfg, func(ctx context.Context, shell *bandonce.Shell) error { return drain(ctx, shell, out) })
	}
	fmt.Fprintln(out, "echo: serving; press Ctrl-C to stop")
	serve := func(ctx context.Context, shell *bandonce.Shell) error { return shell.Run(ctx) }
	return explain(runWithLedger(ctx, getenv, logger, cfg, serve), out)
}

// drain answers what is waiting, then says what it did.
func drain(ctx context.Context, shell *bandonce.Shell, out io.Writer) error {
	res, err := shell.Drain(ctx)
	if err != nil {
		return explain(err, out)
	}
	if !res.Drained {
		return errors.New("stopped before every room was drained; run again to finish")
	}
	fmt.Fprintf(out, "echo: drained %d room(s): %d replied\n", res.Rooms, res.Outcomes[bandonce.Replied])
	if len(res.Stopped) > 0 {
		fmt.Fprintf(out, "echo: %d room(s) stopped; their messages wait for play: %v\n", len(res.Stopped), res.Stopped)
	}
	return nil
}

// explain turns Run's error into what the user should know.
func explain(err error, out io.Writer) error {
	switch {
	case errors.Is(err, bandonce.ErrUnauthorized):
		return fmt.Errorf("the API key in BAND_API_KEY was rejected by Band; check that it is this agent's key: %w", err)
	case errors.Is(err, bandonce.ErrSuperseded):
		return errors.New("another connection of this agent took over; this one stops (run one echo per agent)")
	case err != nil:
		return err
	}
	fmt.Fprintln(out, "echo: stopped")
	return nil
}

func parseDelay(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("ECHO_DELAY=%q is not a non-negative Go duration such as 2s", s)
	}
	return d, nil
}

// Echo is the agent's handler: after delay, reply "echo: <body>" to the
// sender, keyed by the message id so a redelivery never posts twice.
func Echo(delay time.Duration) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, context.Cause(ctx) // interrupted, stopped or shutting down
			}
		}
		return &bandonce.Reply{
			Content:  "echo: " + m.Body(),
			Mentions: []string{m.SenderID},
			DedupKey: "echo:" + m.ID,
		}, nil
	}
}
