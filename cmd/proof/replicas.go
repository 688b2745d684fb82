package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce/pgledger"
	"github.com/band-once/bandonce/proof"
)

// pgReplicaAgent is a replicated schedule's agent on ledgerPG: every
// replica's life runs pgledger itself (Open, RunLeader, its fenced
// Ledger and Transport) on the schedule's own schema.
//
// The schedule runs in virtual time, PostgreSQL in real time; so the
// schema has a function now() of its own, which the lives' connections
// find before pg_catalog's (their search_path), and which reads the
// schedule's clock from a table. A tracer on every statement sets that
// clock to the schedule's virtual time first, and takes the statement
// through the engine (Env.LedgerCall) so that the engine orders the
// replicas' statements, holds a paused replica's, and fails a killed
// replica's and every statement during an outage. pgledger's SQL is
// untouched: its now() is simply the schedule's. A lost ledger answer is,
// here, a statement refused before it ran: pgx applies statements out of
// the engine's reach.
func pgReplicaAgent(cfg durableConfig, s *proof.Schedule) (proof.Factory, func()) {
	sc := &pgSchedule{url: cfg.postgres, schema: fmt.Sprintf("%s_r%d", cfg.schema, pgAgents.Add(1))}
	return func() proof.Agent {
		return func(ctx context.Context, env proof.Env) error {
			if err := sc.prepare(ctx); err != nil {
				return err
			}
			pc, err := pgxpool.ParseConfig(cfg.postgres)
			if err != nil {
				return err
			}
			pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{sc.schema}.Sanitize() + ", pg_catalog"
			pc.ConnConfig.Tracer = &lifeTracer{env: env, clock: sc}
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return err
			}
			defer pool.Close()
			store, err := pgledger.Open(ctx, pool, pgledger.Options{
				AgentID: "agent", Schema: sc.schema, Holder: fmt.Sprintf("replica-%d/life-%d", env.Replica, env.Life),
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				return err
			}
			return store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
				env.Leading(ledger.Epoch())
				defer env.Leading(0)
				lenv := env
				lenv.HTTPClient = &http.Client{Transport: env.Awake(ledger.Transport(env.HTTPClient.Transport))}
				return proof.RunShell(ctx, lenv, unbound{ledger}, proof.ShellConfig{})
			})
		}
	}, sc.close
}

// pgSchedule is one replicated schedule's schema and clock.
type pgSchedule struct {
	url, schema string

	mu   sync.Mutex
	conn *pgx.Conn // sets the clock; created by the first life, in the bubble
	set  time.Time
	err  error
}

// prepare creates the schema with its clock and now() once.
func (sc *pgSchedule) prepare(ctx context.Context) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.conn != nil || sc.err != nil {
		return sc.err
	}
	cc, err := pgx.ParseConfig(sc.url)
	if err != nil {
		return err
	}
	// The clock is the schedule's, not a record: no flush to wait for.
	cc.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(context.WithoutCancel(ctx), cc)
	if err != nil {
		return err
	}
	q := pgx.Identifier{sc.schema}.Sanitize()
	sc.set = time.Now()
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+q+`;
		CREATE TABLE `+q+`.clock (t timestamptz NOT NULL);
		CREATE FUNCTION `+q+`.now() RETURNS timestamptz LANGUAGE sql STABLE AS 'SELECT t FROM `+q+`.clock';`)
	if err == nil {
		_, err = conn.Exec(ctx, `INSERT INTO `+q+`.clock VALUES ($1)`, sc.set)
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		sc.err = fmt.Errorf("-ledger pg: the schedule's schema: %w", err)
		return sc.err
	}
	sc.conn = conn
	return nil
}

// tick sets the schedule's clock to the virtual now, if it moved.
func (sc *pgSchedule) tick(ctx context.Context) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := time.Now()
	if sc.conn == nil || now.Equal(sc.set) {
		return
	}
	if _, err := sc.conn.Exec(context.WithoutCancel(ctx), `UPDATE `+pgx.Identifier{sc.schema}.Sanitize()+`.clock SET t = $1`, now); err == nil {
		sc.set = now
	}
}

// close drops the schedule's schema.
func (sc *pgSchedule) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.conn == nil {
		return
	}
	ctx := context.Background()
	_, _ = sc.conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{sc.schema}.Sanitize()+` CASCADE`)
	_ = sc.conn.Close(ctx)
	sc.conn = nil
}

// lifeTracer takes each statement of one life through the engine.
type lifeTracer struct {
	env   proof.Env
	clock *pgSchedule
}

func (t *lifeTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	op := fmt.Sprint(data.SQL, data.Args)
	if len(op) > 300 {
		op = op[:300]
	}
	if err := t.env.LedgerCall(ctx, op, func() {}); err != nil {
		// Refused: the statement fails as an unreachable database's
		// does, with a deadline that has passed.
		failed, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
		cancel()
		return failed
	}
	t.clock.tick(ctx)
	return ctx
}

func (t *lifeTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
