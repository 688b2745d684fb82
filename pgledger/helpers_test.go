package pgledger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// DSNEnv names the variable that points the tests at a PostgreSQL; .ci/run
// starts one and sets it.
const DSNEnv = "BANDONCE_TEST_POSTGRES"

const testAgent = "agent-7f3c"

// testDSN returns the test database's DSN, or skips the test saying why.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(DSNEnv)
	if dsn == "" {
		t.Skip(DSNEnv + " is not set: this test needs a PostgreSQL server (.ci/run starts one; .ci/postgres start DIR prints a DSN)")
	}
	return dsn
}

// newPool connects to dsn, closed at cleanup.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// testDB is one test's own schema in the test database, dropped at
// cleanup, so tests neither see each other's rows nor need to clean up.
type testDB struct {
	dsn    string
	pool   *pgxpool.Pool
	schema string
}

func newTestDB(t testing.TB) *testDB {
	t.Helper()
	dsn := testDSN(t)
	db := &testDB{dsn: dsn, pool: newPool(t, dsn), schema: fmt.Sprintf("t_%08x", rand.Uint32())}
	t.Cleanup(func() {
		_, err := db.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+db.schema+" CASCADE")
		require.NoError(t, err)
	})
	return db
}

// opts are Options for agent in the test's schema, with a short lease
// and a quiet logger unless the test asks for logs.
func (db *testDB) opts(agent, holder string) Options {
	return Options{AgentID: agent, Schema: db.schema, Holder: holder, LeaseTime: 600 * time.Millisecond, Logger: quiet}
}

// steadyOpts are opts with a lease a loaded machine's renewals keep, for
// the tests that are not about a lease running out: beside the race
// suite a renewal of the short one comes late, and the term ends under
// them (a write refused, a term more than they count).
func (db *testDB) steadyOpts(agent, holder string) Options {
	o := db.opts(agent, holder)
	o.LeaseTime = 30 * time.Second
	return o
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (db *testDB) open(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), db.pool, opts)
	require.NoError(t, err)
	return s
}

// exec runs SQL in the test's schema ({s} stands for it).
func (db *testDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := db.pool.Exec(context.Background(), strings.ReplaceAll(sql, "{s}", db.schema), args...)
	require.NoError(t, err)
}

// count returns a count(*)-style integer query's answer.
func (db *testDB) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.pool.QueryRow(context.Background(), strings.ReplaceAll(sql, "{s}", db.schema), args...).Scan(&n))
	return n
}

// leader is a RunLeader running in the background for a test. Its lead
// function reports each term on terms and holds until its context ends.
type leader struct {
	terms chan term
	stop  context.CancelFunc
	done  chan struct{} // closed when RunLeader returned
	err   error         // RunLeader's answer, set before done closes
}

// term is one stretch of leading: the Ledger and the context lead got.
type term struct {
	ledger *Ledger
	ctx    context.Context
}

// lead starts RunLeader on s and waits for its first term.
func lead(t testing.TB, s *Store) (*leader, term) {
	t.Helper()
	l := startLeader(t, s)
	return l, l.next(t)
}

// next waits for the leader's next term.
func (l *leader) next(t testing.TB) term {
	t.Helper()
	select {
	case tm := <-l.terms:
		return tm
	case <-l.done:
		t.Fatalf("RunLeader returned before leading: %v", l.err)
	case <-time.After(20 * time.Second):
		t.Fatal("RunLeader did not lead within 20 s")
	}
	return term{}
}

// wait waits for RunLeader to return and gives its answer.
func (l *leader) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(20 * time.Second):
		t.Fatal("RunLeader did not return within 20 s")
		return nil
	}
}

// startLeader starts RunLeader on s without waiting for it to lead.
func startLeader(t testing.TB, s *Store) *leader {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &leader{terms: make(chan term, 16), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = s.RunLeader(ctx, func(ctx context.Context, ledger *Ledger) error {
			l.terms <- term{ledger: ledger, ctx: ctx}
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-l.done:
		case <-time.After(20 * time.Second):
			t.Error("RunLeader did not return within 20 s of its context ending")
		}
	})
	return l
}
