package pgledger

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/band-once/bandonce/internal/leaderloop"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configures Open. Only AgentID is required.
type Options struct {
	// AgentID is the agent whose ledger and lease this is: Band's id of
	// the agent. Required. Agents share the tables; each sees only its
	// own rows.
	AgentID string
	// Schema is the PostgreSQL schema holding the tables. Empty means
	// "bandonce". Lower-case letters, digits and underscores.
	Schema string
	// Holder names this process in the lease table and the logs. Empty
	// means "hostname:pid:" and a suffix drawn at random by Open. It must
	// be this process's alone: a process
	// takes a lease its own Holder holds at once (the answer to its
	// acquisition was lost), so two processes sharing one would take the
	// lease from each other at every poll (fenced, so never both writing,
	// but neither leading for long).
	Holder string
	// LeaseTime is how long a lease lasts unless renewed: how long a
	// standby waits after the holder stops renewing. The holder renews
	// every third of it. Zero means 10 s; at least 300 ms.
	LeaseTime time.Duration
	// PollInterval is how often a standby asks whether the lease is free.
	// It also waits exactly until a lease it saw runs out. A graceful
	// hand-over (the holder releases the lease) takes up to one poll.
	// Zero means a twentieth of LeaseTime (500 ms with the default).
	PollInterval time.Duration
	// Logger receives what the leader loop does: acquiring, losing and
	// releasing the lease, and failures talking to the database. Nil
	// means slog.Default().
	Logger *slog.Logger
}

// Defaults and bounds.
const (
	defaultSchema    = "bandonce"
	defaultLeaseTime = 10 * time.Second
	minLeaseTime     = 300 * time.Millisecond
	// defaultPollsPerLease makes the default PollInterval a twentieth
	// of the lease: a standby learns of a release (a graceful hand-over)
	// only when it next asks, so a hand-over takes up to a poll; with a
	// tenth, the 10 s default lease's took up to a second, which the
	// prover's replicas found (issue 28). Two statements a poll per
	// standby is the price.
	defaultPollsPerLease = 20
	// minServerVersion is PostgreSQL 12: the oldest this package is
	// tested against is 15; 12 is the oldest with everything it uses.
	minServerVersion = 120000
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Store is one agent's ledger tables and lease in a PostgreSQL database.
// It holds no connection of its own: every call borrows one from the pool.
// It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	log    *slog.Logger
	sql    statements
	schema string // quoted, ready for SQL
}

// Open checks that the database can hold the ledger and brings its schema
// up to date, creating it on first use, then returns the agent's Store.
// While the database cannot be reached, Open keeps trying, with backoff
// from 100 ms up to Options.PollInterval, until ctx ends. Its other
// errors are *OpenError; see ErrNotPostgres, ErrSchemaTooNew,
// ErrForeignSchema and ErrPermission.
//
// Open does not make this process the agent's writer: RunLeader does,
// once it holds the lease.
func Open(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	opts.Schema = cmp.Or(opts.Schema, defaultSchema)
	fail := func(kind error, cause error, format string, args ...any) error {
		return &OpenError{AgentID: opts.AgentID, Schema: opts.Schema, Kind: kind, Reason: fmt.Sprintf(format, args...), Err: cause}
	}
	switch {
	case pool == nil:
		return nil, fail(nil, nil, "cannot be opened: the pool is nil")
	case strings.TrimSpace(opts.AgentID) == "":
		return nil, fail(nil, nil, "cannot be opened: Options.AgentID is required: the agent's id, as Band answers GET /agent/me; "+
			"an agent configured by its environment has it in BAND_AGENT_ID, which is empty or unset (fakeband prints it with the key)")
	case !schemaName.MatchString(opts.Schema):
		return nil, fail(nil, nil, "cannot be opened: Options.Schema must be lower-case letters, digits and underscores, starting with a letter or underscore")
	case opts.LeaseTime < 0 || opts.LeaseTime > 0 && opts.LeaseTime < minLeaseTime:
		return nil, fail(nil, nil, "cannot be opened: Options.LeaseTime must be zero (10 s) or at least %s", minLeaseTime)
	case opts.PollInterval < 0:
		return nil, fail(nil, nil, "cannot be opened: Options.PollInterval must not be negative")
	}
	opts.LeaseTime = cmp.Or(opts.LeaseTime, defaultLeaseTime)
	opts.PollInterval = cmp.Or(opts.PollInterval, opts.LeaseTime/defaultPollsPerLease)
	if opts.Holder == "" {
		// hostname:pid alone is not the process's: containers sharing the
		// host's hostname (host networking) are each pid 1, and two Stores
		// of one process share both. A random suffix makes it this
		// Store's alone; the suffix stays for the Store's life, which is
		// all a lost acquisition's retry needs.
		host, _ := os.Hostname()
		opts.Holder = fmt.Sprintf("%s:%d:%s", cmp.Or(host, "unknown-host"), os.Getpid(), rand.Text()[:8])
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	schema := pgx.Identifier{opts.Schema}.Sanitize()
	s := &Store{pool: pool, opts: opts, log: log.With("agent", opts.AgentID, "holder", opts.Holder), schema: schema, sql: buildStatements(schema)}

	var failures leaderloop.FailureLog
	for {
		err := s.prepare(ctx)
		if err == nil {
			failures.Recovered(s.log, "pgledger: database reachable again; ledger ready")
			return s, nil
		}
		var open *OpenError
		if errors.As(err, &open) {
			open.AgentID, open.Schema = opts.AgentID, opts.Schema
			return nil, open
		}
		// A context that ended during an attempt may surface as the
		// attempt's own error (a connection reset, say): it is still the
		// context that ended the wait.
		gaveUp := func() error {
			return fail(nil, fmt.Errorf("%w; the last attempt: %w", context.Cause(ctx), err), "cannot be opened: gave up when the context ended")
		}
		if ctx.Err() != nil {
			return nil, gaveUp()
		}
		if !transient(err) {
			return nil, fail(nil, err, "cannot be opened")
		}
		failures.Note(s.log, "pgledger: cannot reach the database to open the ledger; retrying", err)
		// No slower than a standby polls: a replica that starts while
		// the database is down is a standby within a poll of its return,
		// ready for a hand-over (up to a poll), not a backoff later.
		if sleep(ctx, failures.Backoff(opts.PollInterval)) != nil {
			return nil, gaveUp()
		}
	}
}

// prepare checks the server, migrates the schema and checks privileges.
// Its errors are *OpenError (without AgentID and Schema) for a database
// it cannot use, plain errors otherwise.
func (s *Store) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	unusable := func(kind error, cause error, format string, args ...any) error {
		return &OpenError{Kind: kind, Reason: fmt.Sprintf(format, args...), Err: cause}
	}
	var versionNum int
	var version string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, version()`).Scan(&versionNum, &version)
	if err != nil {
		if isPgError(err) && !transient(err) {
			return unusable(ErrNotPostgres, err, "cannot be opened: the server did not answer as PostgreSQL does")
		}
		return err // unreachable, starting up, out of connections: waited out
	}
	if !strings.HasPrefix(version, "PostgreSQL ") {
		return unusable(ErrNotPostgres, nil, "cannot be opened: the server says it is %q", version)
	}
	if versionNum < minServerVersion {
		return unusable(ErrNotPostgres, nil, "cannot be opened: PostgreSQL %d is older than 12", versionNum/10000)
	}
	applied, err := s.appliedMigrations(ctx)
	if err != nil {
		return err
	}
	if len(applied) < len(migrations) {
		if err := s.migrate(ctx); err != nil {
			return err
		}
	}
	var usable bool
	err = s.pool.QueryRow(ctx, s.sql.privileges, s.opts.Schema).Scan(&usable)
	if err != nil {
		return classify(err, "cannot be opened: checking privileges failed")
	}
	if !usable {
		return unusable(ErrPermission, nil, "cannot be used: the database user lacks SELECT, INSERT, UPDATE or DELETE on its tables")
	}
	return nil
}

// appliedMigrations returns the migrations recorded in the schema, after
// checking that each is one of this build's. A schema without the
// migrations table has none.
func (s *Store) appliedMigrations(ctx context.Context) ([]int, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.schema+".migrations").Scan(&exists); err != nil {
		return nil, classify(err, "cannot be opened: looking for the migrations table failed")
	}
	if !exists {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT version, name FROM `+s.schema+`.migrations ORDER BY version`)
	if err != nil {
		return nil, classify(err, "cannot be opened: reading the migrations table failed")
	}
	type row struct {
		Version int
		Name    string
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, classify(err, "cannot be opened: reading the migrations table failed")
	}
	var versions []int
	for i, r := range recorded {
		switch {
		case r.Version > len(migrations):
			return nil, &OpenError{Kind: ErrSchemaTooNew, Reason: fmt.Sprintf(
				"cannot be opened: the schema is at migration %d (%q); this build knows migrations 1 to %d: run a newer build", recorded[len(recorded)-1].Version, recorded[len(recorded)-1].Name, len(migrations))}
		case r.Version != i+1 || r.Name != migrations[i].name:
			return nil, &OpenError{Kind: ErrForeignSchema, Reason: fmt.Sprintf(
				"cannot be opened: the schema's migrations table records migration %d as %q, not this package's %q", r.Version, r.Name, migrations[min(r.Version, len(migrations))-1].name)}
		}
		versions = append(versions, r.Version)
	}
	return versions, nil
}

// migrate applies the missing migrations in one transaction, under an
// advisory lock so that processes starting together migrate once.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock(s.opts.Schema)); err != nil {
		return classify(err, "cannot be opened: taking the migration lock failed")
	}
	for _, ddl := range []string{
		`CREATE SCHEMA IF NOT EXISTS ` + s.schema,
		`CREATE TABLE IF NOT EXISTS ` + s.schema + `.migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`,
	} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return classify(err, "cannot be created")
		}
	}
	var done int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.migrations`).Scan(&done); err != nil {
		return classify(err, "cannot be opened: reading the migrations table failed")
	}
	for i := done; i < len(migrations); i++ {
		m := migrations[i]
		if _, err := tx.Exec(ctx, m.sql(s.schema)); err != nil {
			return classify(err, fmt.Sprintf("cannot be migrated: migration %d (%s) failed", i+1, m.name))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.schema+`.migrations (version, name) VALUES ($1, $2)`, i+1, m.name); err != nil {
			return classify(err, "cannot be migrated: recording migration failed")
		}
		s.log.Info("pgledger: migrated the schema", "schema", s.opts.Schema, "migration", i+1, "name", m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err, "cannot be migrated: commit failed")
	}
	return nil
}

// migrationLock is the advisory lock key of a schema's migrations: FNV-1a
// of the package and schema names.
func migrationLock(schema string) int64 {
	h := uint64(14695981039346656037)
	for _, c := range []byte("bandonce/pgledger:" + schema) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int64(h)
}

// classify turns a PostgreSQL refusal into an *OpenError with its kind;
// other errors pass through.
func classify(err error, reason string) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || transient(err) {
		return err // Open waits these out
	}
	kind := error(nil)
	switch {
	case pg.Code == "42501": // insufficient_privilege
		kind = ErrPermission
		reason += ": the database user lacks the privilege"
	case strings.HasPrefix(pg.Code, "42"): // a table or column not as expected
		kind = ErrForeignSchema
	}
	return &OpenError{Kind: kind, Reason: reason, Err: err}
}

func isPgError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg)
}

// transient reports whether err may go away by itself: the database is
// unreachable, restarting, out of connections, read-only for now (a
// demoted primary during a failover, behind a VIP or a pooler), or a
// statement met a deadlock or serialization failure. A refusal by the
// server for any other reason is not.
func transient(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return !errors.Is(err, context.Canceled)
	}
	if pg.Code == "25006" { // read_only_sql_transaction
		return true
	}
	switch pg.Code[:2] {
	case "08", // connection exception
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources: too many connections
		"57": // operator intervention: shutdown, cannot connect now
		return true
	}
	return false
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
