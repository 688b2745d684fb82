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
	"io"
	"log/slog"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/examplekit"
)

func main() {
	// -fake plays one request on the in-process fake (runFake, in
	// fake.go); otherwise run serves the agent the environment names.
	// -v logs what the shell does to stderr.
	examplekit.Command{Name: "tools", Fake: runFake, Run: run}.Main()
}

// run serves the agent named by the environment until ctx ends.
func run(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger) error {
	if getenv("BAND_API_KEY") == "" {
		return errors.New("BAND_API_KEY is not set: export the agent's API key")
	}
	paymentsURL := getenv("TOOLS_PAYMENTS_URL")
	if paymentsURL == "" {
		return errors.New("TOOLS_PAYMENTS_URL is not set: point it at the payment API (or run with -fake)")
	}
	// BAND_BASE_URL, BAND_WS_URL and the BANDONCE_ tunables, such as
	// BANDONCE_SETTLE_WINDOW.
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	team := Team{Billing: getenv("TOOLS_BILLING"), Retired: getenv("TOOLS_RETIRED")}
	cfg.Handler = Handler(&examplekit.PaymentsClient{BaseURL: paymentsURL}, team)
	cfg.Logger = logger
	ledger := ""
	if path := getenv("TOOLS_LEDGER"); path != "" {
		ledger = "bolt:" + path
	}
	return examplekit.WithLedger(ctx, ledger, getenv, logger, cfg, func(ctx context.Context, cfg bandonce.Config) error {
		return examplekit.Serve(ctx, "tools", cfg, out)
	})
}
