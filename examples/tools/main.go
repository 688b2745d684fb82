// Command tools is a Band agent shaped like an LLM tool loop, built on
// band-once: for a message such as "refund order-17" it opens a task on
// the room's board and joins it, posts a thought event, a tool_call event,
// refunds the order through a payment API (a journaled Step with an
// idempotency key), posts a tool_result event, completes the task with a
// comment, stores what it learned as a memory about the sender, supersedes
// the memory the refund proved wrong and archives the one it made stale,
// approves the contact request of the payment team's agent and removes the
// agent it replaced, sets the room's goal on its board, opens a titled
// follow-up room, sends the sender a contact request, asks a second
// participant of the room to confirm, and answers the sender.
// Every one of those effects happens exactly once, however often the
// process is killed and the message served again.
//
// Configuration comes from the environment:
//
//	BAND_API_KEY         the agent's API key (required)
//	BAND_BASE_URL        the REST root (default https://app.band.ai/api/v1)
//	BAND_WS_URL          the Phoenix socket (default derived from BAND_BASE_URL)
//	TOOLS_PAYMENTS_URL   the payment API's root (required)
//	TOOLS_LEDGER         a file for the durable ledger (default: in memory)
//	TOOLS_BILLING        the payment team's agent, whose contact request it approves
//	TOOLS_RETIRED        the agent TOOLS_BILLING replaced, which it removes from its contacts
//
// SIGINT or SIGTERM shut it down gracefully (exit 0). With -fake it plays
// one request against the in-process fake Band and a fake payment API and
// prints the room; no key or network is needed.
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

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/boltledger"
)

func main() {
	fake := flag.Bool("fake", false, "play one request on the in-process fake Band and print the room")
	verbose := flag.Bool("v", false, "log what the shell does to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var err error
	if *fake {
		err = runFake(ctx, os.Stdout, logger)
	} else {
		err = run(ctx, os.Getenv, os.Stdout, logger)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
}

// run serves the agent named by the environment until ctx ends.
func run(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger) error {
	key := getenv("BAND_API_KEY")
	if key == "" {
		return errors.New("BAND_API_KEY is not set: export the agent's API key")
	}
	paymentsURL := getenv("TOOLS_PAYMENTS_URL")
	if paymentsURL == "" {
		return errNoPayments
	}
	// BAND_BASE_URL, BAND_WS_URL and the BANDONCE_ tunables, such as
	// BANDONCE_SETTLE_WINDOW.
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	team := Team{Billing: getenv("TOOLS_BILLING"), Retired: getenv("TOOLS_RETIRED")}
	cfg.Handler = Handler(&PaymentsClient{BaseURL: paymentsURL}, team)
	cfg.Logger = logger
	if path := getenv("TOOLS_LEDGER"); path != "" {
		// The ledger belongs to one agent: ask Band who this key is.
		client, err := band.New(band.Config{APIKey: key, BaseURL: cfg.BaseURL, Logger: logger})
		if err != nil {
			return err
		}
		me, err := client.Me(ctx)
		if err != nil {
			return fmt.Errorf("asking Band who this agent is: %w", err)
		}
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: me.ID})
		if err != nil {
			return err
		}
		defer ledger.Close()
		cfg.Ledger = ledger
	}
	shell, err := bandonce.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "tools: serving; press Ctrl-C to stop")
	err = shell.Run(ctx)
	switch {
	case errors.Is(err, bandonce.ErrUnauthorized):
		return fmt.Errorf("the API key in BAND_API_KEY was rejected by Band: %w", err)
	case errors.Is(err, bandonce.ErrSuperseded):
		return errors.New("another connection of this agent took over; this one stops (run one per agent)")
	case err != nil:
		return err
	}
	fmt.Fprintln(out, "tools: stopped")
	return nil
}
