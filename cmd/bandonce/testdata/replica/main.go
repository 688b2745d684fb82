// Command replica is examples/echo's replica mode cut to the bone, for
// bandonce verify -replicas's tests: it answers "echo: <text>" under the
// message's dedup key, on the Shell, with a pgledger ledger in the
// PostgreSQL database BANDONCE_LEDGER names, serving while it holds the
// agent's lease (BANDONCE_LEASE_TIME) and standing by otherwise. Then:
//
//	-unfenced  its writes are not fenced: it keeps serving after it lost
//	           the lease (paused past it, say), with a ledger of its own in
//	           memory and its requests to Band sent whatever its lease says
//
// SIGTERM exits 0 after a graceful drain; warnings go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/pgledger"
)

var unfenced = flag.Bool("unfenced", false, "keep serving, unfenced, after the lease is lost")

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, logger); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger) error {
	cfg, err := bandonce.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.AgentID == "" {
		return errors.New("BAND_AGENT_ID names the agent's lease; it is not set")
	}
	cfg.Logger = logger
	cfg.Handler = func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: "echo:" + m.ID}, nil
	}
	lease, err := time.ParseDuration(os.Getenv("BANDONCE_LEASE_TIME"))
	if err != nil {
		return fmt.Errorf("BANDONCE_LEASE_TIME: %w", err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("BANDONCE_LEDGER"))
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := pgledger.Open(ctx, pool, pgledger.Options{AgentID: cfg.AgentID, LeaseTime: lease, Logger: logger})
	if err != nil {
		return err
	}
	err = store.RunLeader(ctx, func(leadCtx context.Context, ledger *pgledger.Ledger) error {
		if *unfenced {
			// The flaw: the term outlives the lease. The shell runs
			// until the process is told to stop, not until the lease is
			// lost, with nothing between it and Band.
			cfg.Ledger = bandonce.NewMemoryLedger()
			shell, err := bandonce.New(cfg)
			if err != nil {
				return err
			}
			return shell.Run(ctx)
		}
		cfg.Ledger = ledger
		cfg.HTTPClient = &http.Client{Transport: ledger.Transport(nil)}
		shell, err := bandonce.New(cfg)
		if err != nil {
			return err
		}
		return shell.Run(leadCtx)
	})
	if errors.Is(err, bandonce.ErrSuperseded) {
		return errors.New("another connection of this agent took over; this one stops")
	}
	return err
}
