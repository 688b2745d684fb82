package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/pgledger"
	"github.com/band-once/bandonce/proof"
)

// The durable agents live here, not in package proof, so that verify
// (which imports proof and is linked into users' test binaries) links
// neither bbolt nor pgx.

// ledgerKind names the ledger a durable schedule keeps across lives.
type ledgerKind string

// Ledger kinds.
const (
	// ledgerMemory keeps a MemoryLedger across lives and reports it
	// durable: proof.ShellAgent's own.
	ledgerMemory ledgerKind = "memory"
	// ledgerBolt keeps a boltledger file, reopened by every life.
	ledgerBolt ledgerKind = "bolt"
	// ledgerPG keeps a pgledger in PostgreSQL, under an agent id of the
	// schedule's own; every life opens it and leads under a new lease.
	ledgerPG ledgerKind = "pg"
)

// durableConfig says where the durable ledgers live.
type durableConfig struct {
	// kind is the ledger schedules with Durable set keep across lives.
	kind ledgerKind
	// dir holds the bolt files; required with ledgerBolt.
	dir string
	// postgres is the database URL and schema the PostgreSQL schema of
	// the pgledgers; both required with ledgerPG. The caller drops the
	// schema when the run is over.
	postgres, schema string
}

// durableAgent is the prover's Shell agent (proof.ShellAgent) with the
// durable schedules' ledger cfg names.
func durableAgent(cfg durableConfig) func(*proof.Schedule) (proof.Factory, func()) {
	plain := proof.ShellAgent(proof.ShellConfig{})
	replicas := proof.ReplicaAgent(proof.ReplicaConfig{})
	return func(s *proof.Schedule) (proof.Factory, func()) {
		switch {
		case s.Replicas >= 2 && cfg.kind == ledgerPG:
			return pgReplicaAgent(cfg, s)
		case s.Replicas >= 2:
			return replicas(s)
		case s.Durable && cfg.kind == ledgerPG:
			return pgAgent(cfg), nil
		case s.Durable && cfg.kind == ledgerBolt:
			return boltAgent(cfg)
		}
		return plain(s)
	}
}

var boltFiles atomic.Int64

// boltAgent is one durable schedule's agent on ledgerBolt: every life
// reopens the schedule's file. The cleanup removes it.
func boltAgent(cfg durableConfig) (proof.Factory, func()) {
	path := filepath.Join(cfg.dir, fmt.Sprintf("ledger-%d.db", boltFiles.Add(1)))
	return func() proof.Agent {
		return func(ctx context.Context, env proof.Env) error {
			l, err := boltledger.Open(path, boltledger.Options{AgentID: env.AgentID})
			if err != nil {
				return err
			}
			defer l.Close()
			return proof.RunShell(ctx, env, l, proof.ShellConfig{})
		}
	}, func() { _ = os.Remove(path) }
}

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

// pgAgent is one durable schedule's agent on ledgerPG: every life
// connects, opens the schedule's ledger, and runs the shell as leader.
// The ledger is named by an agent id of its own within the run's schema,
// so schedules never see each other's records.
func pgAgent(cfg durableConfig) proof.Factory {
	agentID := fmt.Sprint("proof-", pgAgents.Add(1))
	return func() proof.Agent {
		return func(ctx context.Context, env proof.Env) error {
			pool, err := pgxpool.New(ctx, cfg.postgres)
			if err != nil {
				return err
			}
			defer pool.Close()
			store, err := pgledger.Open(ctx, pool, pgledger.Options{
				AgentID: agentID, Schema: cfg.schema, Holder: fmt.Sprint("life-", env.Life),
				LeaseTime: pgLease, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				return err
			}
			return store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
				return proof.RunShell(ctx, env, unbound{ledger}, proof.ShellConfig{})
			})
		}
	}
}
