package procverify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// database is a PostgreSQL database of one schedule's own.
type database struct {
	server, name, url string
}

// createMu serializes CREATE DATABASE: PostgreSQL refuses to copy
// template1 while another session copies it.
var createMu sync.Mutex

// createDatabase makes a fresh database on the server at serverURL.
func createDatabase(ctx context.Context, serverURL string) (*database, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL URL does not parse: %w", err)
	}
	createMu.Lock()
	defer createMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to PostgreSQL to make a schedule's database: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	name := fmt.Sprintf("bandonce_verify_%016x", rand.Uint64())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("cannot create a schedule's database: %w", err)
	}
	u.Path = "/" + name
	return &database{server: serverURL, name: name, url: u.String()}, nil
}

// drop removes the database, ending any session left in it.
func (d *database) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.server)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)")
	return err
}
