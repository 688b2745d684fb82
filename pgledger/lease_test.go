package pgledger

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/band-once/bandonce/internal/leaderloop"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/safebuf"
)

// holding reports whether a term still leads.
func holding(tm term) bool { return tm.ctx.Err() == nil }

// Two replicas, one lease: the second waits while the first holds it,
// and takes it at once, with the next epoch, when the first lets go.
func TestOneLeaderAtATime(t *testing.T) {
	db := newTestDB(t)
	// A lease long enough that a loaded machine's holder renews in time;
	// the renewals are counted, not the wall clock.
	opts := func(holder string) Options {
		o := db.opts(testAgent, holder)
		o.LeaseTime = 3 * time.Second
		return o
	}
	first, a := lead(t, db.open(t, opts("holder-a")))
	second := startLeader(t, db.open(t, opts("holder-b")))

	// More than a lease time passes, four renewals of it: every renewal
	// keeps the standby out.
	renewals, last := 0, db.expiry(t, testAgent)
	until(t, "four renewals", func() bool {
		if e := db.expiry(t, testAgent); !e.Equal(last) {
			renewals, last = renewals+1, e
		}
		return renewals >= 4
	})
	assert.Empty(t, second.terms, "the standby leads while the holder renews")
	assert.True(t, holding(a))
	require.NoError(t, a.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyIntent))
	assert.Equal(t, "holder-a", db.holder(t, testAgent))

	first.stop()
	require.NoError(t, first.wait(t), "a clean stop")
	b := second.next(t)
	assert.Equal(t, int64(2), b.ledger.Epoch())
	assert.Equal(t, "holder-b", db.holder(t, testAgent))
	err := a.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyAccepted)
	require.ErrorIs(t, err, ErrFenced, "the old term writes no more")
}

// expiry returns when the database says agent's lease runs out.
func (db *testDB) expiry(t *testing.T, agent string) time.Time {
	t.Helper()
	var at time.Time
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT expires_at FROM `+db.schema+`.leases WHERE agent_id = $1`, agent).Scan(&at))
	return at
}

// holder returns who the database says holds agent's lease.
func (db *testDB) holder(t *testing.T, agent string) string {
	t.Helper()
	var holder string
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT holder FROM `+db.schema+`.leases WHERE agent_id = $1`, agent).Scan(&holder))
	return holder
}

// A holder that dies (here: acquires and never renews, as a SIGKILLed one
// would) loses the lease when it runs out; the standby takes it with the
// next epoch, and the dead holder's writes are fenced off with a reason.
func TestAStandbyTakesOverWhenTheHolderStopsRenewing(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	dead := db.open(t, db.opts(testAgent, "holder-dead"))
	epoch, err := leaseStatements{dead}.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), epoch)
	zombie := &Ledger{store: dead, lease: leaderloop.NewLease(1, nil, time.Now().Add(time.Hour))}
	require.NoError(t, zombie.SetKey(ctx, "room-1", "before", bandonce.KeyIntent), "the holder writes while its lease lasts")

	_, b := lead(t, db.open(t, db.opts(testAgent, "holder-b")))
	assert.Equal(t, int64(2), b.ledger.Epoch())
	got, err := b.ledger.Key(ctx, "room-1", "before")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyIntent, got, "the new holder sees the dead one's intent")

	// Its own clock fooled (it believes an hour is left), the zombie is
	// still refused by the database.
	for _, write := range []func() error{
		func() error { return zombie.SetKey(ctx, "room-1", "after", bandonce.KeyIntent) },
		func() error { return zombie.SetKey(ctx, "room-1", "before", bandonce.KeyAccepted) },
		func() error { return zombie.SetKey(ctx, "room-1", "before", bandonce.KeyUnknown) },
		func() error { return zombie.SetAckPending(ctx, "room-1", "m", true) },
		func() error { return zombie.SetAckPending(ctx, "room-1", "m", false) },
	} {
		err := write()
		require.ErrorIs(t, err, ErrFenced)
		var fenced *FencedError
		require.ErrorAs(t, err, &fenced)
		assert.Equal(t, int64(1), fenced.Epoch)
		assert.Equal(t, testAgent, fenced.AgentID)
		assert.Equal(t, "another process took the lease over: it is at epoch 2, held by holder-b", fenced.Reason)
	}
	got, err = b.ledger.Key(ctx, "room-1", "before")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyIntent, got, "nothing the zombie tried was written")
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.keys WHERE key = 'after'`))
	assert.Zero(t, db.count(t, `SELECT count(*) FROM {s}.acks`))
}

// When another process takes the lease (here by hand, as a takeover after
// a partition would look to this one), the next renewal is refused: the
// leader's context ends with ErrLeaseLost, its ledger writes no more, and
// RunLeader stands by until the lease is free again.
func TestLosingTheLeaseCancelsTheLeaderAndItStandsBy(t *testing.T) {
	db := newTestDB(t)
	var logs safebuf.Buffer
	opts := db.opts(testAgent, "holder-a")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, a := lead(t, db.open(t, opts))
	db.exec(t, `UPDATE {s}.leases SET epoch = epoch + 1, holder = 'thief', expires_at = now() + interval '1 hour'`)

	select {
	case <-a.ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leader's context did not end")
	}
	require.ErrorIs(t, context.Cause(a.ctx), ErrLeaseLost)
	assert.Contains(t, context.Cause(a.ctx).Error(), "the database refused the renewal")
	err := a.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyIntent)
	require.ErrorIs(t, err, ErrFenced)
	assert.Contains(t, err.Error(), "the lease is no longer held")
	assert.Equal(t, Stats{}, a.ledger.Stats(), "refused without asking the database")

	// It stands by (it says so, and has not returned); that it goes on
	// standing by is shown below, when it leads again once the lease is
	// free.
	until(t, "the leader standing by", func() bool {
		return strings.Contains(logs.String(), "standing by: another process holds the lease")
	})
	select {
	case <-l.done:
		t.Fatalf("RunLeader returned instead of standing by: %v", l.err)
	default:
	}
	assert.Contains(t, logs.String(), "lease lost; stopping the leader")
	assert.Contains(t, logs.String(), "lease_holder=thief")

	db.exec(t, `UPDATE {s}.leases SET expires_at = now()`)
	again := l.next(t)
	assert.Equal(t, int64(3), again.ledger.Epoch())
	require.NoError(t, again.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyIntent))
}

// An intent needs a third of the lease left by the database's clock;
// other writes only need the lease.
func TestAnIntentNeedsAThirdOfTheLeaseLeft(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	opts := db.opts(testAgent, "holder-a")
	opts.LeaseTime = time.Minute // no renewal during the test
	_, a := lead(t, db.open(t, opts))
	db.exec(t, `UPDATE {s}.leases SET expires_at = now() + interval '10 seconds'`)

	err := a.ledger.SetKey(ctx, "room-1", "k", bandonce.KeyIntent)
	require.ErrorIs(t, err, ErrFenced)
	assert.Regexp(t, `only 9\.\d+s of the lease was left by the database's clock; an intent needs more than 20s`, err.Error())
	require.NoError(t, a.ledger.SetKey(ctx, "room-1", "k", bandonce.KeyAccepted))
	require.NoError(t, a.ledger.SetAckPending(ctx, "room-1", "m", true))
	db.exec(t, `UPDATE {s}.leases SET expires_at = now() + interval '30 seconds'`)
	require.NoError(t, a.ledger.SetKey(ctx, "room-2", "k", bandonce.KeyIntent))
}

// A holder paused while its intent write was in flight (SIGSTOP, a long
// GC pause) may find, when the answer comes, that its lease has run out
// meanwhile: the write committed, but SetKey fails, so the shell does not
// post. The pause is played by holding the database's answers back.
func TestAnIntentWhoseAnswerComesTooLateIsRefused(t *testing.T) {
	db := newTestDB(t)
	p := newProxy(t, db.dsn)
	// One round trip per statement, so that the write reaches the
	// database while its answer is held (by default pgx prepares a
	// statement first, on a round trip of its own).
	oneTrip := func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec }
	proxied := &testDB{dsn: db.dsn, pool: p.pool(t, db.dsn, oneTrip), schema: db.schema}
	_, a := lead(t, proxied.open(t, db.opts(testAgent, "holder-a")))
	// Connections for the write and the renewals are open before the
	// pause: the pause holds answers, a new connection's included.
	var conns []*pgxpool.Conn
	for range 3 {
		c, err := proxied.pool.Acquire(context.Background())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}

	p.setHeld(true)
	wrote := make(chan error, 1)
	go func() { wrote <- a.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyIntent) }()
	// The write reaches the database while the lease holds (waited for
	// there, so that a goroutine started late on a loaded machine cannot
	// turn this into a write refused before it is sent).
	until(t, "the intent written in the database", func() bool {
		return db.count(t, `SELECT count(*) FROM {s}.keys WHERE key = 'k' AND state = 1`) == 1
	})
	// The holder gives its lease up while the answer waits, which is
	// still shorter than the statement's timeout (a second). Waiting only
	// for the lease to run out by its clock is not enough: a renewal sent
	// during the hold committed while the lease was good, and if its
	// answer is read before its deadline fires the lease is rightly
	// extended, and the write rightly stands (a flake, 2 runs in 10).
	select {
	case <-a.ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leader did not give its lease up while the answers were held")
	}
	require.ErrorIs(t, context.Cause(a.ctx), ErrLeaseLost)
	p.setHeld(false)
	err := <-wrote
	require.ErrorIs(t, err, ErrFenced)
	assert.Equal(t, 1, db.count(t, `SELECT count(*) FROM {s}.keys WHERE key = 'k' AND state = 1`),
		"the intent is on record: the next holder reads the room before posting")
}

// A holder whose own clock says the lease ran out (it was paused past
// it) refuses every write without asking the database, and its renewal
// loop gives the lease up on waking.
func TestAHolderPastItsDeadlineWritesNothing(t *testing.T) {
	db := newTestDB(t)
	_, a := lead(t, db.open(t, db.opts(testAgent, "holder-a")))
	a.ledger.lease.Extend(time.Now().Add(-time.Millisecond)) // as if it slept past it

	err := a.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyAccepted)
	require.ErrorIs(t, err, ErrFenced)
	assert.Contains(t, err.Error(), "ran out by this process's clock")
	assert.Equal(t, Stats{}, a.ledger.Stats())
	select {
	case <-a.ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leader's context did not end")
	}
	require.ErrorIs(t, context.Cause(a.ctx), ErrLeaseLost)
}

// A leader that fails while it holds the lease ends RunLeader with its
// error and releases the lease, so a standby need not wait it out.
func TestALeaderErrorEndsRunLeaderAndReleasesTheLease(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, db.opts(testAgent, "holder-a"))
	boom := errors.New("boom")
	err := s.RunLeader(context.Background(), func(ctx context.Context, l *Ledger) error {
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, db.count(t, `SELECT count(*) FROM {s}.leases WHERE expires_at <= now()`), "released")

	_, b := lead(t, db.open(t, db.opts(testAgent, "holder-b")))
	assert.Equal(t, int64(2), b.ledger.Epoch())
}

// A lease table the database refuses for good (dropped, here) ends
// RunLeader with the error instead of retrying forever.
func TestRunLeaderReturnsWhenTheDatabaseRefusesForGood(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, db.opts(testAgent, "holder-a"))
	db.exec(t, `DROP TABLE {s}.leases`)
	err := s.RunLeader(context.Background(), func(context.Context, *Ledger) error {
		t.Error("led without a lease table")
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "campaigning for the lease of agent")
	assert.Contains(t, err.Error(), "does not exist")
}

// When ctx ends, a leader that returns ctx's own cause (or nothing) ends
// RunLeader cleanly; an error of its own is passed on.
func TestRunLeaderAfterItsContextEnds(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, db.opts(testAgent, "holder-a"))
	boom := errors.New("boom while stopping")
	for _, tc := range []struct {
		returns func(ctx context.Context) error
		want    error
	}{
		{func(context.Context) error { return nil }, nil},
		{func(ctx context.Context) error { return context.Cause(ctx) }, nil},
		{func(context.Context) error { return boom }, boom},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		err := s.RunLeader(ctx, func(ctx context.Context, _ *Ledger) error {
			cancel()
			<-ctx.Done()
			return tc.returns(ctx)
		})
		assert.Equal(t, tc.want, err)
		assert.Equal(t, 1, db.count(t, `SELECT count(*) FROM {s}.leases WHERE expires_at <= now()`), "released")
	}
}

// The prover's replicas found it (issue 28): a standby whose acquisition
// was applied and whose answer was lost found the lease held, by itself,
// and waited a whole lease time with no leader. The same holder now takes
// its own lease again at once, with the next epoch.
func TestAnAcquisitionWhoseAnswerWasLostCostsAPollNotALease(t *testing.T) {
	db := newTestDB(t)
	o := db.opts(testAgent, "holder-a")
	o.LeaseTime = time.Minute // the old behaviour waits it out
	s := db.open(t, o)
	// The acquisition whose answer was lost: applied, never seen.
	epoch, err := sqlStore{s}.Acquire(context.Background(), testAgent, "holder-a", o.LeaseTime)
	require.NoError(t, err)
	require.Equal(t, int64(1), epoch)

	_, tm := lead(t, s) // within 20 s, a third of the lease
	assert.Equal(t, int64(2), tm.ledger.Epoch(), "the lost term is fenced by the next epoch")
	require.NoError(t, tm.ledger.SetKey(context.Background(), "room-1", "k", bandonce.KeyIntent))

	other := db.open(t, db.opts(testAgent, "holder-b"))
	got, err := sqlStore{other}.Acquire(context.Background(), testAgent, "holder-b", o.LeaseTime)
	require.NoError(t, err)
	assert.Zero(t, got, "another holder still waits for the lease")
}

// The prover's replicas found it (issue 28): with a standby asking every
// tenth of the lease, a graceful hand-over under the 10 s default lease
// took up to a second, one poll. The default poll is now a twentieth.
func TestAStandbyAsksTwentyTimesALeaseByDefault(t *testing.T) {
	db := newTestDB(t)
	o := db.opts(testAgent, "a")
	o.LeaseTime = 10 * time.Second
	s := db.open(t, o)
	assert.Equal(t, 500*time.Millisecond, s.opts.PollInterval, "a hand-over takes at most a poll: under a second")
}

// The prover's replicas found it (issue 28): a holder whose clock ran
// slow counted its lease as held after the database had let it run out
// and a standby had taken over, and sent to Band meanwhile (a holder at
// 0.64% slow, woken from a pause 5 ms after the takeover, with 60 ms
// left by its clock). The holder now counts its lease MaxClockSkew
// shorter than the database does.
func TestAHolderCountsItsLeaseShorterThanTheDatabaseByTheSkewBound(t *testing.T) {
	db := newTestDB(t)
	o := db.opts(testAgent, "a")
	o.LeaseTime = time.Minute
	s := db.open(t, o)
	var left time.Duration
	require.NoError(t, s.RunLeader(context.Background(), func(_ context.Context, l *Ledger) error {
		left = l.lease.Left()
		return nil
	}))
	// left only shrinks as time passes: a slow machine cannot fail this.
	assert.LessOrEqual(t, left, time.Minute-time.Duration(float64(time.Minute)*MaxClockSkew))
}

// Two replicas with the default Holder ("hostname:pid") share it whenever
// their hostname and pid agree: two containers on one host with host
// networking (Kubernetes hostNetwork, docker --network host), each the
// pid 1 of its namespace, or two RunLeaders in one process. The acquire
// statement hands a current lease to its own Holder at once, so the
// second replica takes the lease from a live, healthy leader at its first
// poll, and they take it from each other at every poll after.
func TestTheDefaultHolderIsTheStoresAlone(t *testing.T) {
	db := newTestDB(t)
	a, b := db.steadyOpts(testAgent, ""), db.steadyOpts(testAgent, "")
	first, second := db.open(t, a), db.open(t, b)
	_, tm := lead(t, first)
	epoch, err := leaseStatements{second}.Acquire(context.Background())
	require.NoError(t, err)
	require.Zero(t, epoch, "a second replica (holder %q) took the current lease of a healthy leader (holder %q, epoch %d)",
		second.opts.Holder, first.opts.Holder, tm.ledger.Epoch())
}
