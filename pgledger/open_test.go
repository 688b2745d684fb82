package pgledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/safebuf"
)

func TestOpenCreatesTheSchemaOnce(t *testing.T) {
	db := newTestDB(t)
	db.open(t, db.opts(testAgent, "holder-a"))
	for _, table := range []string{"migrations", "leases", "keys", "acks", "steps"} {
		assert.Equal(t, 1, db.count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2`, db.schema, table), table)
	}
	var applied time.Time
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT applied_at FROM `+db.schema+`.migrations WHERE version = 1`).Scan(&applied))
	assert.Equal(t, len(migrations), db.count(t, `SELECT count(*) FROM {s}.migrations`))

	db.open(t, db.opts("agent-other", "holder-b"))
	var again time.Time
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT applied_at FROM `+db.schema+`.migrations WHERE version = 1`).Scan(&again))
	assert.Equal(t, applied, again, "a second Open migrates nothing")
	assert.Equal(t, len(migrations), db.count(t, `SELECT count(*) FROM {s}.migrations`))
}

// Replicas starting together race to create the schema; the advisory
// lock makes one of them do it and the others find it done.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	db := newTestDB(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			_, err := Open(context.Background(), db.pool, db.opts(testAgent, fmt.Sprint("holder-", i)))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, len(migrations), db.count(t, `SELECT count(*) FROM {s}.migrations`))
}

func TestOpenRejectsBadOptions(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err) // lazy: nothing is dialled
	defer pool.Close()
	for name, tc := range map[string]struct {
		pool *pgxpool.Pool
		opts Options
		want string
	}{
		"nil pool":        {nil, Options{AgentID: testAgent}, "the pool is nil"},
		"no agent":        {pool, Options{AgentID: "  "}, "Options.AgentID is required: the agent's id, as Band answers GET /agent/me; an agent configured by its environment has it in BAND_AGENT_ID, which is empty or unset"},
		"quoted schema":   {pool, Options{AgentID: testAgent, Schema: `a"b`}, "Options.Schema must be"},
		"upper schema":    {pool, Options{AgentID: testAgent, Schema: "Ledger"}, "Options.Schema must be"},
		"short lease":     {pool, Options{AgentID: testAgent, LeaseTime: time.Millisecond}, "Options.LeaseTime must be"},
		"negative lease":  {pool, Options{AgentID: testAgent, LeaseTime: -time.Second}, "Options.LeaseTime must be"},
		"negative poll":   {pool, Options{AgentID: testAgent, PollInterval: -1}, "Options.PollInterval must not be negative"},
		"too long schema": {pool, Options{AgentID: testAgent, Schema: string(bytes.Repeat([]byte("s"), 64))}, "Options.Schema must be"},
	} {
		_, err := Open(context.Background(), tc.pool, tc.opts)
		var open *OpenError
		require.ErrorAs(t, err, &open, name)
		assert.Nil(t, open.Kind, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}

func TestOpenRefusesASchemaFromANewerBuild(t *testing.T) {
	db := newTestDB(t)
	db.open(t, db.opts(testAgent, "holder-a"))
	db.exec(t, `INSERT INTO {s}.migrations (version, name) VALUES ($1, 'tables of a future build')`, len(migrations)+1)

	_, err := Open(context.Background(), db.pool, db.opts(testAgent, "holder-a"))
	require.ErrorIs(t, err, ErrSchemaTooNew)
	var open *OpenError
	require.ErrorAs(t, err, &open)
	assert.Equal(t, testAgent, open.AgentID)
	assert.Equal(t, db.schema, open.Schema)
	assert.Contains(t, err.Error(), fmt.Sprintf(`the schema is at migration %d ("tables of a future build"); this build knows migrations 1 to %d`, len(migrations)+1, len(migrations)))
}

func TestOpenRefusesAForeignSchema(t *testing.T) {
	for name, setup := range map[string]string{
		"another tool's migrations table": `CREATE SCHEMA {s}; CREATE TABLE {s}.migrations (id serial, applied text)`,
		"a migration of another name": `CREATE SCHEMA {s}; CREATE TABLE {s}.migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
			INSERT INTO {s}.migrations (version, name) VALUES (1, 'users table')`,
		"the keys table missing": `CREATE SCHEMA {s}; CREATE TABLE {s}.migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
			INSERT INTO {s}.migrations (version, name) VALUES (1, 'leases, keys and ack-pending records');
			CREATE TABLE {s}.leases (agent_id text); CREATE TABLE {s}.acks (agent_id text)`,
	} {
		t.Run(name, func(t *testing.T) {
			db := newTestDB(t)
			db.exec(t, setup)
			_, err := Open(context.Background(), db.pool, db.opts(testAgent, "holder-a"))
			require.ErrorIs(t, err, ErrForeignSchema)
			assert.Contains(t, err.Error(), db.schema)
		})
	}
}

// A role with neither CREATE on the database nor rights on the schema is
// told so; one granted the table privileges uses a schema an owner
// migrated, without any DDL.
func TestOpenWithoutPermission(t *testing.T) {
	db := newTestDB(t)
	role := db.schema + "_user"
	db.exec(t, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		db.exec(t, `DROP OWNED BY `+role)
		db.exec(t, `DROP ROLE `+role)
	})
	db.exec(t, `REVOKE CREATE ON DATABASE `+dbName(t, db)+` FROM PUBLIC`)
	t.Cleanup(func() { db.exec(t, `GRANT CREATE ON DATABASE `+dbName(t, db)+` TO PUBLIC`) })
	cfg, err := pgxpool.ParseConfig(db.dsn)
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	limited, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(limited.Close)

	_, err = Open(context.Background(), limited, db.opts(testAgent, "holder-a"))
	require.ErrorIs(t, err, ErrPermission, "a new schema it may not create")

	db.open(t, db.opts(testAgent, "owner")) // the owner migrates
	_, err = Open(context.Background(), limited, db.opts(testAgent, "holder-a"))
	require.ErrorIs(t, err, ErrPermission, "a schema it may not use")

	db.exec(t, `GRANT USAGE ON SCHEMA {s} TO `+role)
	db.exec(t, `GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {s} TO `+role)
	_, err = Open(context.Background(), limited, db.opts(testAgent, "holder-a"))
	require.ErrorIs(t, err, ErrPermission, "tables it may read but not update")
	assert.Contains(t, err.Error(), "lacks SELECT, INSERT, UPDATE or DELETE")

	db.exec(t, `GRANT UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO `+role)
	s, err := Open(context.Background(), limited, db.opts(testAgent, "holder-a"))
	require.NoError(t, err)
	_, tm := lead(t, s)
	require.NoError(t, tm.ledger.SetAckPending(context.Background(), "room-1", "m", true))
}

func dbName(t *testing.T, db *testDB) string {
	t.Helper()
	var name string
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT quote_ident(current_database())`).Scan(&name))
	return name
}

// While the database cannot be reached Open keeps trying, says so once,
// and opens when it comes back; if it never does, the context ends it.
func TestOpenWaitsOutAnUnreachableDatabase(t *testing.T) {
	dsn := testDSN(t)
	p := newProxy(t, dsn)
	pool := p.pool(t, dsn)
	var logs safebuf.Buffer
	opts := Options{AgentID: testAgent, Schema: fmt.Sprintf("t_open_%d", time.Now().UnixNano()), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	t.Cleanup(func() {
		_, err := newPool(t, dsn).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+opts.Schema+" CASCADE")
		require.NoError(t, err)
	})

	p.setCut(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, pool, opts)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var open *OpenError
	require.ErrorAs(t, err, &open)
	assert.Nil(t, open.Kind, "an outage is not an unusable database")
	assert.Contains(t, logs.String(), "cannot reach the database to open the ledger; retrying")

	refused := p.refusals()
	opened := make(chan error, 1)
	go func() {
		_, err := Open(context.Background(), pool, opts)
		opened <- err
	}()
	until(t, "the second Open refused twice", func() bool { return p.refusals() >= refused+2 })
	p.setCut(false)
	require.NoError(t, <-opened)
	assert.Contains(t, logs.String(), "database reachable again")
}

// A server that is restarting answers as PostgreSQL does, but "the
// database system is starting up" (57P03): that is an outage, which Open
// waits out, not a server that is not PostgreSQL.
func TestOpenWaitsOutADatabaseStartingUp(t *testing.T) {
	dsn := testDSN(t)
	p := newProxy(t, dsn)
	pool := p.pool(t, dsn)
	opts := Options{AgentID: testAgent, Schema: fmt.Sprintf("t_open_%d", time.Now().UnixNano())}
	t.Cleanup(func() {
		_, err := newPool(t, dsn).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+opts.Schema+" CASCADE")
		require.NoError(t, err)
	})
	p.setStartingUp(true)
	opened := make(chan error, 1)
	go func() {
		_, err := Open(context.Background(), pool, opts)
		opened <- err
	}()
	until(t, "Open told twice that the server is starting up", func() bool { return p.startsRefused() >= 2 })
	p.setStartingUp(false)
	require.NoError(t, <-opened)
}

// The errors that go away by themselves, which Open and the leader loop
// wait out, and the refusals that do not.
func TestWhichServerErrorsAreWaitedOut(t *testing.T) {
	for code, want := range map[string]bool{
		"08006": true,  // connection failure
		"40P01": true,  // deadlock
		"53300": true,  // too many connections
		"57P03": true,  // starting up
		"57P01": true,  // admin shutdown
		"25006": true,  // read-only: a demoted primary during a failover
		"42501": false, // insufficient privilege
		"42P01": false, // undefined table
		"22021": false, // invalid byte sequence
	} {
		assert.Equal(t, want, transient(&pgconn.PgError{Code: code}), code)
		if want {
			var open *OpenError
			assert.False(t, errors.As(classify(&pgconn.PgError{Code: code}, "x"), &open), "%s is not an unusable database", code)
		}
	}
}

// A server that speaks PostgreSQL's protocol but is not PostgreSQL (or
// too old a one) is refused before anything is created.
func TestOpenRefusesWhatIsNotPostgreSQL12OrLater(t *testing.T) {
	for _, tc := range []struct {
		versionNum, version, want string
	}{
		{"230100", "CockroachDB CCL v23.1.0 (x86_64-pc-linux-gnu)", `the server says it is "CockroachDB CCL`},
		{"110022", "PostgreSQL 11.22 on x86_64-pc-linux-gnu", "PostgreSQL 11 is older than 12"},
	} {
		addr := fakeServer(t, tc.versionNum, tc.version)
		cfg, err := pgxpool.ParseConfig("postgres://nobody@" + addr + "/none?sslmode=disable")
		require.NoError(t, err)
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		_, err = Open(context.Background(), pool, Options{AgentID: testAgent})
		pool.Close()
		require.ErrorIs(t, err, ErrNotPostgres, tc.version)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// fakeServer answers the PostgreSQL wire protocol on loopback: any
// simple query gets one row, (versionNum, version), until cleanup.
func fakeServer(t *testing.T, versionNum, version string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				_ = serveFake(conn, versionNum, version)
			})
		}
	})
	return ln.Addr().String()
}

func serveFake(conn net.Conn, versionNum, version string) error {
	be := pgproto3.NewBackend(conn, conn)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.SSLRequest); ok {
			if _, err := conn.Write([]byte("N")); err != nil {
				return err
			}
			continue
		}
		break
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: version})
	be.Send(&pgproto3.ParameterStatus{Name: "client_encoding", Value: "UTF8"})
	be.Send(&pgproto3.ParameterStatus{Name: "standard_conforming_strings", Value: "on"})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return err
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return err
		}
		switch msg.(type) {
		case *pgproto3.Terminate:
			return nil
		case *pgproto3.Query:
			be.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{
				{Name: []byte("current_setting"), DataTypeOID: 23, DataTypeSize: 4, TypeModifier: -1},
				{Name: []byte("version"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
			}})
			be.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(versionNum), []byte(version)}})
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if err := be.Flush(); err != nil {
				return err
			}
		default:
			return errors.New("fake server: unexpected message")
		}
	}
}
