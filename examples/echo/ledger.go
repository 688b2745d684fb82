package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/pgledger"
)

// runWithLedger builds the shell cfg describes with the ledger
// BANDONCE_LEDGER names and hands it to serve: no ledger (in memory),
// bolt:PATH (a file on this machine), or a postgres:// URL (shared by every
// replica of the agent: this one serves while it holds the agent's lease
// and stands by otherwise, with a new shell for every term).
func runWithLedger(ctx context.Context, getenv func(string) string, logger *slog.Logger, cfg bandonce.Config, serve func(context.Context, *bandonce.Shell) error) error {
	spec := getenv("BANDONCE_LEDGER")
	run := func(ctx context.Context, ledger bandonce.Ledger) error {
		cfg.Ledger = ledger
		shell, err := bandonce.New(cfg)
		if err != nil {
			return err
		}
		return serve(ctx, shell)
	}
	switch {
	case spec == "":
		return run(ctx, nil)
	case strings.HasPrefix(spec, "bolt:"), strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
	default:
		return fmt.Errorf("BANDONCE_LEDGER=%q is neither bolt:PATH nor a postgres:// URL", spec)
	}
	agentID, err := whoAmI(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if path, ok := strings.CutPrefix(spec, "bolt:"); ok {
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: agentID})
		if err != nil {
			return err
		}
		defer ledger.Close()
		return run(ctx, ledger)
	}
	lease, err := parseDuration("BANDONCE_LEASE_TIME", getenv("BANDONCE_LEASE_TIME"))
	if err != nil {
		return err
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
		// Once the lease is gone by this process's clock (it was paused
		// past it), nothing more reaches Band, not even a mark.
		cfg.HTTPClient = &http.Client{Transport: ledger.Transport(nil)}
		return run(ctx, ledger)
	})
}

// whoAmI is the agent's id, which names its ledger: BAND_AGENT_ID when
// given (the shell checks it against Band at start), otherwise Band's
// answer to GET /agent/me, retrying transient failures, and saying so,
// until ctx ends or the shell's start-up budget runs out.
func whoAmI(ctx context.Context, cfg bandonce.Config, logger *slog.Logger) (string, error) {
	if cfg.AgentID != "" {
		return cfg.AgentID, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(cfg.StartTimeout, bandonce.DefaultStartTimeout))
	defer cancel()
	url := strings.TrimRight(cmp.Or(cfg.BaseURL, bandonce.DefaultBaseURL), "/") + "/agent/me"
	client := &http.Client{
		Timeout: 30 * time.Second,
		// A redirect would carry X-API-Key wherever it points: refuse it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		id, retry, err := askMe(ctx, client, url, cfg.APIKey)
		if err == nil || !retry {
			return id, err
		}
		logger.Warn("echo: cannot ask Band for the agent's id, which names its ledger; retrying", "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("GET /agent/me: %w (last failure: %w)", ctx.Err(), err)
		}
	}
}

// maxMeBody bounds the answer to GET /agent/me.
const maxMeBody = 1 << 20

func askMe(ctx context.Context, client *http.Client, url, key string) (id string, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("X-API-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return "", true, err
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		return "", false, fmt.Errorf("the API key in BAND_API_KEY was rejected by Band (GET /agent/me: %s)", res.Status)
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		return "", true, fmt.Errorf("GET /agent/me: %s", res.Status)
	case res.StatusCode != http.StatusOK:
		return "", false, fmt.Errorf("GET /agent/me: %s", res.Status)
	}
	// An agent's profile is a few hundred bytes: read no more than
	// maxMeBody of whatever answers.
	data, err := io.ReadAll(io.LimitReader(res.Body, maxMeBody+1))
	if err != nil {
		return "", true, fmt.Errorf("GET /agent/me: reading the answer: %w", err)
	}
	if len(data) > maxMeBody {
		return "", false, fmt.Errorf("GET /agent/me: the answer is over %d bytes; is BAND_BASE_URL Band?", maxMeBody)
	}
	var me struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &me); err != nil || me.Data.ID == "" {
		return "", false, errors.Join(errors.New("GET /agent/me: no agent id in the answer"), err)
	}
	return me.Data.ID, false, nil
}

// parseDuration reads an optional non-negative duration variable.
func parseDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a non-negative Go duration such as 10s", name, s)
	}
	return d, nil
}
