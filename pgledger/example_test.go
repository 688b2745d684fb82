package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/pgledger"
)

// Every replica of the agent runs this same program against one database:
// the one holding the lease serves, the others stand by. (Compiled, not
// run: it needs a PostgreSQL and a Band; the package's tests run it against
// both.)
func ExampleStore_RunLeader() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer pool.Close()
	store, err := pgledger.Open(ctx, pool, pgledger.Options{AgentID: os.Getenv("BAND_AGENT_ID")})
	if errors.Is(err, pgledger.ErrPermission) {
		fmt.Fprintln(os.Stderr, "grant the agent's database user its tables:", err)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
		shell, err := bandonce.New(bandonce.Config{
			APIKey: os.Getenv("BAND_API_KEY"),
			Ledger: ledger,
			Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
				return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
			},
		})
		if err != nil {
			return err
		}
		return shell.Run(ctx) // cancelled with pgledger.ErrLeaseLost if the lease goes
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
