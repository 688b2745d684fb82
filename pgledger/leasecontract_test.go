package pgledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/leasetest"
)

// sqlStore is pgledger's own statements as leasetest.Store: the SQL the
// lease and every fenced write run in production.
type sqlStore struct{ s *Store }

func (q sqlStore) Acquire(ctx context.Context, agent, holder string, d time.Duration) (int64, error) {
	var epoch int64
	err := q.s.pool.QueryRow(ctx, q.s.sql.acquire, agent, holder, d.Microseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return epoch, err
}

func (q sqlStore) Lookup(ctx context.Context, agent string) (string, int64, time.Duration, bool, error) {
	var holder string
	var epoch, micros int64
	err := q.s.pool.QueryRow(ctx, q.s.sql.lookup, agent).Scan(&holder, &epoch, &micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, 0, false, nil
	}
	return holder, epoch, time.Duration(micros) * time.Microsecond, err == nil, err
}

func (q sqlStore) Renew(ctx context.Context, agent string, epoch int64, d time.Duration) (bool, error) {
	tag, err := q.s.pool.Exec(ctx, q.s.sql.renew, agent, epoch, d.Microseconds())
	return err == nil && tag.RowsAffected() == 1, err
}

func (q sqlStore) Release(ctx context.Context, agent string, epoch int64) (bool, error) {
	tag, err := q.s.pool.Exec(ctx, q.s.sql.release, agent, epoch)
	return err == nil && tag.RowsAffected() == 1, err
}

func (q sqlStore) SetKey(ctx context.Context, agent string, epoch int64, margin time.Duration, room, key string, state bandonce.KeyState) (bool, error) {
	var held bool
	err := q.s.pool.QueryRow(ctx, q.s.sql.setKey, agent, epoch, margin.Microseconds(), room, key, int16(state)).Scan(&held)
	return held, err
}

func (q sqlStore) Key(ctx context.Context, agent, room, key string) (bandonce.KeyState, error) {
	var state int16
	err := q.s.pool.QueryRow(ctx, q.s.sql.key, agent, room, key).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return bandonce.KeyUnknown, nil
	}
	return bandonce.KeyState(state), err
}

// pgledger's SQL keeps the lease and fencing contract that the prover's
// in-memory model keeps too (internal/leasemodel's
// TestTheModelKeepsTheLeaseContract): the replicas the prover runs in
// memory meet the semantics production has.
func TestTheSQLKeepsTheLeaseContract(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, db.opts(testAgent, "contract"))
	leasetest.Run(t, sqlStore{s}, "sql")
}
