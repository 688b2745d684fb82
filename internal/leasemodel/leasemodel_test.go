package leasemodel_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/leasemodel"
	"github.com/band-once/bandonce/internal/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is the model as leasetest.Store, on the wall clock.
type store struct{ db *leasemodel.DB }

func (s store) Acquire(_ context.Context, agent, holder string, d time.Duration) (int64, error) {
	return s.db.Acquire(agent, holder, d), nil
}

func (s store) Lookup(_ context.Context, agent string) (string, int64, time.Duration, bool, error) {
	h, e, left, ok := s.db.Lookup(agent)
	return h, e, left, ok, nil
}

func (s store) Renew(_ context.Context, agent string, epoch int64, d time.Duration) (bool, error) {
	return s.db.Renew(agent, epoch, d), nil
}

func (s store) Release(_ context.Context, agent string, epoch int64) (bool, error) {
	return s.db.Release(agent, epoch), nil
}

func (s store) SetKey(ctx context.Context, agent string, epoch int64, margin time.Duration, room, key string, state bandonce.KeyState) (bool, error) {
	var err error
	held := s.db.Write(agent, epoch, margin, func(r bandonce.Ledger) { err = r.SetKey(ctx, room, key, state) })
	return held, err
}

func (s store) Key(ctx context.Context, agent, room, key string) (st bandonce.KeyState, err error) {
	s.db.Read(agent, func(r bandonce.Ledger) { st, err = r.Key(ctx, room, key) })
	return st, err
}

// The model keeps pgledger's lease and fencing contract, the one its SQL
// keeps on PostgreSQL (pgledger's TestTheSQLKeepsTheLeaseContract).
func TestTheModelKeepsTheLeaseContract(t *testing.T) {
	leasetest.Run(t, store{leasemodel.New(time.Now)}, "model")
}

// The broken model the prover's self-tests run, with fencing off, applies
// the writes its fence refuses, and still says the fence did not hold.
func TestTheModelWithoutFencingAppliesRefusedWrites(t *testing.T) {
	db := leasemodel.New(time.Now)
	db.NoFencing = true
	held := db.Write("a", 7, 0, func(bandonce.Ledger) {})
	if held {
		t.Fatal("an unfenced write must still report that the fence did not hold")
	}
	var st bandonce.KeyState
	db.Write("a", 7, 0, func(r bandonce.Ledger) { _ = r.SetKey(context.Background(), "r", "k", bandonce.KeyIntent) })
	db.Read("a", func(r bandonce.Ledger) { st, _ = r.Key(context.Background(), "r", "k") })
	if st != bandonce.KeyIntent {
		t.Fatalf("the broken model applies writes the fence refuses; got %v", st)
	}
}
