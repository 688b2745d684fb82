package proof

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/pgledger"
)

var pgAgents atomic.Int64

// unbound is a Ledger without its bandonce.AgentBinder: each schedule's
// ledger is named by a label of its own, so that the re-runs of one
// schedule (shrinking replays it) never see each other's records, and
// binding it to the agent Band names would refuse that label.
type unbound struct{ bandonce.Ledger }

// pgLease is the lease under the prover. Every life releases its lease
// when it is killed (the engine cancels it and waits for it to return),
// so the next life never waits one out; the lease only has to outlast a
// schedule's real running time between renewals, which are counted in
// the bubble's virtual time while the database counts in real time.
const pgLease = time.Minute

// pgAgent is one durable schedule's agent on LedgerPG: every life
// connects, opens the schedule's ledger, and runs the shell as leader.
// The ledger is named by an agent id of its own within the run's schema,
// so schedules never see each other's records.
func pgAgent(cfg ShellConfig) Factory {
	agentID := fmt.Sprint("proof-", pgAgents.Add(1))
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			pool, err := pgxpool.New(ctx, cfg.Postgres)
			if err != nil {
				return err
			}
			defer pool.Close()
			store, err := pgledger.Open(ctx, pool, pgledger.Options{
				AgentID: agentID, Schema: cfg.Schema, Holder: fmt.Sprint("life-", env.Life),
				LeaseTime: pgLease, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				return err
			}
			return store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
				return runShell(ctx, env, unbound{ledger}, cfg)
			})
		}
	}
}
