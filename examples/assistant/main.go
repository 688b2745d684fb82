// Command assistant is a Band agent that is a language model in a tool
// loop, built on band-once's package agentloop: a shop's support
// assistant that looks an order up (order_status), refunds it through a
// payment API (refund, the effect that must happen once), tracks the work
// as a task on the room's board, reports a thought, stores what it learned
// as a memory about the sender and answers. Every model call is a
// journaled step and every tool call runs at most once under a key derived
// from its place in the turn, so however often the process is killed and
// the message served again, the order is refunded once, each Band write is
// made once and the sender gets one answer.
//
// Configuration comes from the environment:
//
//	BAND_API_KEY            the agent's API key (required)
//	BAND_BASE_URL           the REST root (default https://app.band.ai/api/v1)
//	BAND_WS_URL             the Phoenix socket (default derived from BAND_BASE_URL)
//	ANTHROPIC_API_KEY       use Claude through the Anthropic SDK (ANTHROPIC_BASE_URL too), or
//	OPENAI_API_KEY          use the OpenAI SDK's Chat Completions (OPENAI_BASE_URL too)
//	ASSISTANT_MODEL         the model's name (default claude-sonnet-5-5, or gpt-5.5)
//	ASSISTANT_PAYMENTS_URL  the payment API's root (required)
//	BANDONCE_LEDGER         the ledger: empty for memory (lost on exit),
//	                        bolt:PATH for a file, or a postgres:// URL
//	BANDONCE_LEASE_TIME     with PostgreSQL, the agent's lease (default 10s)
//
// SIGINT or SIGTERM shut it down gracefully (exit 0). With -fake it plays
// one request against the in-process fake Band, the fake model server
// (agentloop/fakemodel, through the Anthropic SDK) and a fake payment
// API, and prints the room; no key or network is needed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/openaimodel"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/pgledger"
)

func main() {
	fake := flag.Bool("fake", false, "play one request on the in-process fake Band and fake model, and print the room")
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
		fmt.Fprintln(os.Stderr, "assistant:", err)
		os.Exit(1)
	}
}

// errNoModel is returned when no model API key is set.
var errNoModel = errors.New("set ANTHROPIC_API_KEY or OPENAI_API_KEY for the model (or run with -fake)")

// modelFrom picks the model adapter the environment names. The SDKs'
// own retries (429 with Retry-After, 5xx) apply within one model call.
func modelFrom(getenv func(string) string) (agentloop.Model, error) {
	name := getenv("ASSISTANT_MODEL")
	if key := getenv("ANTHROPIC_API_KEY"); key != "" {
		var opts []anthropicoption.RequestOption
		if base := getenv("ANTHROPIC_BASE_URL"); base != "" {
			opts = append(opts, anthropicoption.WithBaseURL(base))
		}
		m := anthropicOn("https://api.anthropic.com/", key, opts...)
		if name != "" {
			m.Name = anthropic.Model(name)
		}
		return m, nil
	}
	if key := getenv("OPENAI_API_KEY"); key != "" {
		opts := []openaioption.RequestOption{openaioption.WithAPIKey(key)}
		if base := getenv("OPENAI_BASE_URL"); base != "" {
			opts = append(opts, openaioption.WithBaseURL(base))
		}
		client := openai.NewClient(opts...)
		m := &openaimodel.Model{Client: &client, Name: shared.ChatModelGPT5_5}
		if name != "" {
			m.Name = shared.ChatModel(name)
		}
		return m, nil
	}
	return nil, errNoModel
}

// run serves the agent named by the environment until ctx ends.
func run(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger) error {
	if getenv("BAND_API_KEY") == "" {
		return errors.New("BAND_API_KEY is not set: export the agent's API key")
	}
	paymentsURL := getenv("ASSISTANT_PAYMENTS_URL")
	if paymentsURL == "" {
		return errors.New("ASSISTANT_PAYMENTS_URL is not set: point it at the payment API (or run with -fake)")
	}
	model, err := modelFrom(getenv)
	if err != nil {
		return err
	}
	// BAND_BASE_URL, BAND_WS_URL and the BANDONCE_ tunables, such as
	// BANDONCE_SETTLE_WINDOW.
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	cfg.Handler = NewLoop(model, &PaymentsClient{BaseURL: paymentsURL}).Handler()
	cfg.Logger = logger
	serve := func(ctx context.Context, cfg bandonce.Config) error {
		shell, err := bandonce.New(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "assistant: serving; press Ctrl-C to stop")
		err = shell.Run(ctx)
		switch {
		case errors.Is(err, bandonce.ErrUnauthorized):
			return fmt.Errorf("the API key in BAND_API_KEY was rejected by Band: %w", err)
		case errors.Is(err, bandonce.ErrSuperseded):
			return errors.New("another connection of this agent took over; this one stops (run one per agent)")
		}
		return err
	}
	if err := withLedger(ctx, getenv, logger, cfg, serve); err != nil {
		return err
	}
	fmt.Fprintln(out, "assistant: stopped")
	return nil
}

// withLedger hands serve the configuration with the ledger
// BANDONCE_LEDGER names: none (in memory), bolt:PATH, or a postgres://
// URL, where this process serves while it holds the agent's lease.
func withLedger(ctx context.Context, getenv func(string) string, logger *slog.Logger, cfg bandonce.Config, serve func(context.Context, bandonce.Config) error) error {
	spec := getenv("BANDONCE_LEDGER")
	path, bolt := strings.CutPrefix(spec, "bolt:")
	switch {
	case spec == "":
		return serve(ctx, cfg)
	case bolt, strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
	default:
		return fmt.Errorf("BANDONCE_LEDGER=%q is neither bolt:PATH nor a postgres:// URL", spec)
	}
	// The ledger belongs to one agent: ask Band who this key is.
	agentID := cfg.AgentID
	if agentID == "" {
		client, err := band.New(band.Config{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, Logger: logger})
		if err != nil {
			return err
		}
		me, err := client.Me(ctx)
		if err != nil {
			return fmt.Errorf("asking Band who this agent is: %w", err)
		}
		agentID = me.ID
	}
	if bolt {
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: agentID})
		if err != nil {
			return err
		}
		defer ledger.Close()
		cfg.Ledger = ledger
		return serve(ctx, cfg)
	}
	var lease time.Duration
	if s := getenv("BANDONCE_LEASE_TIME"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("BANDONCE_LEASE_TIME=%q is not a positive Go duration such as 10s", s)
		}
		lease = d
	}
	pool, err := pgxpool.New(ctx, spec)
	if err != nil {
		return fmt.Errorf("BANDONCE_LEDGER is not a usable PostgreSQL URL: %w", err)
	}
	defer pool.Close()
	store, err := pgledger.Open(ctx, pool, pgledger.Options{AgentID: agentID, LeaseTime: lease, Logger: logger})
	if err != nil {
		return err
	}
	return store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
		// Once the lease is gone by this process's clock, nothing more
		// reaches Band, not even a mark.
		cfg.Ledger = ledger
		cfg.HTTPClient = &http.Client{Transport: ledger.Transport(nil)}
		return serve(ctx, cfg)
	})
}
