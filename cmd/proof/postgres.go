package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSchema gives the run a PostgreSQL schema of its own, so that runs on
// one database never meet, and returns what drops it afterwards. It
// connects once first, so a wrong URL fails before any schedule runs.
func pgSchema(shell *durableConfig, url string) (drop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("-ledger pg: cannot reach the database: %w", err)
	}
	_ = conn.Close(ctx)
	shell.postgres = url
	shell.schema = fmt.Sprintf("bandonce_proof_%d_%d", time.Now().Unix(), os.Getpid())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{shell.schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "proof: could not drop the run's schema %s: %v\n", shell.schema, err)
		}
	}, nil
}
