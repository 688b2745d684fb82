package examplekit

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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/pgledger"
)

// Command is what an example's main runs: Fake plays one request on the
// in-process fake Band and prints the room (with -fake), Run serves the
// agent the environment names until ctx ends.
type Command struct {
	Name string // the command's name, which prefixes its errors
	Fake func(ctx context.Context, out io.Writer, logger *slog.Logger) error
	Run  func(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger) error
}

// Main parses the flags (-fake, and -v to log what the shell does to
// stderr; without it, its warnings: see Logger), runs the command until SIGINT or SIGTERM (a graceful stop,
// exit 0), and exits 1 with the error on stderr if it fails.
func (c Command) Main() {
	fake := flag.Bool("fake", false, "play one request on the in-process fake Band and print the room")
	verbose := flag.Bool("v", false, "log what the shell does to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *fake {
		err = c.Fake(ctx, os.Stdout, Logger(*verbose, true))
	} else {
		err = c.Run(ctx, os.Getenv, os.Stdout, Logger(*verbose, false))
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, c.Name+":", err)
		os.Exit(1)
	}
}

// Logger is the shell's logger for an example: with verbose, everything
// to stderr; otherwise the warnings (Band or the ledger in trouble, a
// message dead-lettered, the agent throttled), since stdout says what
// the example does and stderr is for trouble; on the fake, nothing.
func Logger(verbose, fake bool) *slog.Logger {
	switch {
	case verbose:
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	case fake:
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Serve runs a shell of cfg until ctx ends, printing "<name>: serving"
// once it starts and "<name>: stopped" once it stopped gracefully. A key
// Band rejects and a connection that another one of the agent took over
// are said in words.
func Serve(ctx context.Context, name string, cfg bandonce.Config, out io.Writer) error {
	shell, err := bandonce.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, name+": serving; press Ctrl-C to stop")
	err = shell.Run(ctx)
	switch {
	case errors.Is(err, bandonce.ErrUnauthorized):
		return fmt.Errorf("the API key in BAND_API_KEY was rejected by Band: %w", err)
	case errors.Is(err, bandonce.ErrSuperseded):
		return errors.New("another connection of this agent took over; this one stops (run one per agent)")
	case err != nil:
		return err
	}
	fmt.Fprintln(out, name+": stopped")
	return nil
}

// WithLedger hands serve the configuration with the ledger spec names:
// "" (in memory, lost on exit), bolt:PATH (a file), or a postgres:// URL,
// where this process serves while it holds the agent's lease
// (BANDONCE_LEASE_TIME, default 10s). A ledger belongs to one agent, so
// Band is asked who the key is first.
func WithLedger(ctx context.Context, spec string, getenv func(string) string, logger *slog.Logger, cfg bandonce.Config, serve func(context.Context, bandonce.Config) error) error {
	path, bolt := strings.CutPrefix(spec, "bolt:")
	switch {
	case spec == "":
		return serve(ctx, cfg)
	case bolt, strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
	default:
		return fmt.Errorf("BANDONCE_LEDGER=%q is neither bolt:PATH nor a postgres:// URL", spec)
	}
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
