package leaderloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/leasemodel"
)

// modelStore is the loop's Store on leasemodel, counting acquisitions.
type modelStore struct {
	db       *leasemodel.DB
	holder   string
	lease    time.Duration
	acquires int
}

func (s *modelStore) Acquire(context.Context) (int64, error) {
	s.acquires++
	return s.db.Acquire("agent", s.holder, s.lease), nil
}

func (s *modelStore) Lookup(context.Context) (string, int64, time.Duration, bool, error) {
	holder, epoch, left, found := s.db.Lookup("agent")
	return holder, epoch, left, found, nil
}

func (s *modelStore) Renew(_ context.Context, epoch int64) (bool, error) {
	return s.db.Renew("agent", epoch, s.lease), nil
}

func (s *modelStore) Release(_ context.Context, epoch int64) (bool, error) {
	return s.db.Release("agent", epoch), nil
}

// rateClock runs ppm parts per million fast (slow when negative).
type rateClock struct {
	origin time.Time
	ppm    int
}

func (c rateClock) rate() float64 { return 1 + float64(c.ppm)/1e6 }

func (c rateClock) Now() time.Time {
	return c.origin.Add(time.Duration(math.Ceil(float64(time.Since(c.origin)) * c.rate())))
}

func (c rateClock) Real(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d) / c.rate()))
}

var errLost = errors.New("lease lost")

func config(store Store, clock Clock, lease time.Duration) Config {
	return Config{
		AgentID: "agent", Store: store, Clock: clock, LeaseTime: lease, PollInterval: lease / 20,
		CallTimeout: lease / 2, MaxClockSkew: 0.01, Lost: errLost, Log: slog.New(slog.DiscardHandler),
	}
}

// A holder that died right after it acquired the lease leaves all of it;
// the standby takes over when it runs out by the database's clock, not a
// poll later and not late by its own clock's skew (a clock 1% slow woke
// it 5 ms late before it counted the wait short by the skew bound), and
// it asks no more than once a poll until then and a few times near the
// end: it never spins.
func TestAStandbyTakesOverWhenTheLeaseRunsOut(t *testing.T) {
	const lease = 10 * time.Second
	for _, ppm := range []int{-10_000, 0, 10_000} {
		t.Run(fmt.Sprintf("clock %+d ppm", ppm), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := leasemodel.New(time.Now)
				require.Equal(t, int64(1), db.Acquire("agent", "dead", lease))
				start := time.Now()
				store := &modelStore{db: db, holder: "standby", lease: lease}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var took time.Duration
				err := Run(ctx, config(store, rateClock{origin: start, ppm: ppm}, lease), func(context.Context, *Lease) error {
					took = time.Since(start)
					cancel()
					return nil
				})
				require.NoError(t, err)
				assert.GreaterOrEqual(t, took, lease, "the database refuses before the lease runs out")
				assert.LessOrEqual(t, took, lease+minWait, "the standby woke late")
				assert.LessOrEqual(t, store.acquires, 20+4, "a poll's asking, and a few near the end")
			})
		})
	}
}

// A holder renews while it leads and releases the lease when its leader
// returns, so that a standby takes over within a poll; one that returns
// after losing the lease stands by again.
func TestAHolderRenewsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		db := leasemodel.New(time.Now)
		store := &modelStore{db: db, holder: "a", lease: lease}
		err := Run(t.Context(), config(store, nil, lease), func(ctx context.Context, ls *Lease) error {
			time.Sleep(3 * lease) // renewed meanwhile, or the lease would be lost
			assert.Empty(t, ls.Short(0), "the lease still holds after three lease times")
			return errors.New("done")
		})
		require.EqualError(t, err, "done")
		_, _, left, found := db.Lookup("agent")
		require.True(t, found)
		assert.Zero(t, left, "released at once")
	})
}

// The wait after each failure doubles from 100 ms and stops at the
// ceiling (pgledger's Open gives its poll interval), and a ceiling under
// 100 ms still waits 100 ms: never a spin.
func TestBackoffDoublesToItsCeilingAndNeverSpins(t *testing.T) {
	var f FailureLog
	log := slog.New(slog.DiscardHandler)
	var waits []time.Duration
	for range 6 {
		f.Note(log, "failed", errors.New("down"))
		waits = append(waits, f.Backoff(500*time.Millisecond))
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms, 500 * ms}, waits)
	assert.Equal(t, 100*ms, f.Backoff(time.Millisecond))
	for range 40 {
		f.Note(log, "failed", errors.New("down"))
	}
	assert.Equal(t, time.Hour, f.Backoff(time.Hour), "many failures do not overflow the doubling")
}

// downStore is a database that cannot be reached: every statement fails
// at once (connection refused), and each Acquire's time is recorded.
type downStore struct {
	at     []time.Time
	cancel context.CancelFunc
}

var errRefused = errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")

func (s *downStore) Acquire(context.Context) (int64, error) {
	s.at = append(s.at, time.Now())
	if len(s.at) == 50 {
		s.cancel()
	}
	return 0, errRefused
}
func (s *downStore) Lookup(context.Context) (string, int64, time.Duration, bool, error) {
	return "", 0, 0, false, errRefused
}
func (s *downStore) Renew(context.Context, int64) (bool, error)   { return false, errRefused }
func (s *downStore) Release(context.Context, int64) (bool, error) { return false, errRefused }

// A standby whose PollInterval is short (Options allow any positive one)
// retries a database that is down with no floor on the wait: a tight loop
// of connection attempts for as long as the outage lasts. The lookup path
// waits at least minWait "so it cannot spin", and Open backs off from
// 100 ms; the campaign's failure path does neither.
func TestACampaignAgainstADownDatabaseDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := &downStore{cancel: cancel}
		cfg := config(s, nil, time.Second)
		cfg.PollInterval = time.Microsecond
		err := Run(ctx, cfg, func(context.Context, *Lease) error { return nil })
		require.NoError(t, err)
		require.Len(t, s.at, 50)
		for i := 1; i < len(s.at); i++ {
			require.GreaterOrEqual(t, s.at[i].Sub(s.at[i-1]), minWait,
				"attempt %d came %s after the one before: the standby spins against a database that is down", i, s.at[i].Sub(s.at[i-1]))
		}
	})
}
