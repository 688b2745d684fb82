// Package leasetest holds a lease store to pgledger's lease and fencing
// contract: the same checks run against pgledger's SQL on a real
// PostgreSQL (pgledger's tests) and against internal/leasemodel (the
// prover's in-memory database), so the model the prover's replicas run on
// cannot drift from the statements production runs.
//
// The checks never wait on a clock for something not to happen: a lease
// that must still hold is taken for an hour, one that must have run out
// for a microsecond (and the check waits until the store says so).
package leasetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// Store is one database's leases and fenced key records, statement for
// statement as pgledger issues them.
type Store interface {
	// Acquire takes agent's lease for d if it is free or ran out: the new
	// epoch, or 0 when another holder's lease is current.
	Acquire(ctx context.Context, agent, holder string, d time.Duration) (int64, error)
	// Lookup reads agent's lease; ok false when there is none.
	Lookup(ctx context.Context, agent string) (holder string, epoch int64, left time.Duration, ok bool, err error)
	// Renew and Release act only on epoch's lease while it has not run
	// out, and report whether they did.
	Renew(ctx context.Context, agent string, epoch int64, d time.Duration) (bool, error)
	Release(ctx context.Context, agent string, epoch int64) (bool, error)
	// SetKey is a fenced write: it records the key's state only if the
	// lease is epoch's and expires more than margin from now, and
	// reports whether that fence held.
	SetKey(ctx context.Context, agent string, epoch int64, margin time.Duration, room, key string, state bandonce.KeyState) (bool, error)
	// Key reads a key's state (unfenced).
	Key(ctx context.Context, agent, room, key string) (bandonce.KeyState, error)
}

const (
	long  = time.Hour
	short = time.Microsecond
)

// Run runs every check, each on agents of its own (prefix, then a name),
// so that checks sharing a store never meet.
func Run(t *testing.T, s Store, prefix string) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, t.Context(), s, fmt.Sprintf("%s-%s", prefix, c.agent))
		})
	}
}

var checks = []struct {
	name, agent string
	run         func(t *testing.T, ctx context.Context, s Store, agent string)
}{
	{"the first acquisition is epoch 1 and a current lease keeps others out", "first", func(t *testing.T, ctx context.Context, s Store, agent string) {
		_, _, _, ok, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		require.False(t, ok, "no lease before the first acquisition")
		e, err := s.Acquire(ctx, agent, "a", long)
		require.NoError(t, err)
		require.Equal(t, int64(1), e)
		holder, epoch, left, ok, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "a", holder)
		assert.Equal(t, int64(1), epoch)
		assert.Greater(t, left, long-time.Minute)
		again, err := s.Acquire(ctx, agent, "b", long)
		require.NoError(t, err)
		assert.Zero(t, again, "a current lease is not taken over")
		holder, epoch, _, _, err = s.Lookup(ctx, agent)
		require.NoError(t, err)
		assert.Equal(t, "a", holder)
		assert.Equal(t, int64(1), epoch)
	}},
	{"a lease that ran out is taken over with the next epoch and its holder fenced", "expired", func(t *testing.T, ctx context.Context, s Store, agent string) {
		e, err := s.Acquire(ctx, agent, "a", short)
		require.NoError(t, err)
		require.Equal(t, int64(1), e)
		ranOut(t, ctx, s, agent)
		renewed, err := s.Renew(ctx, agent, 1, long)
		require.NoError(t, err)
		assert.False(t, renewed, "a lease that ran out is not renewed")
		held, err := s.SetKey(ctx, agent, 1, 0, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.False(t, held, "no write under a lease that ran out")
		e, err = s.Acquire(ctx, agent, "b", long)
		require.NoError(t, err)
		assert.Equal(t, int64(2), e)
		held, err = s.SetKey(ctx, agent, 1, 0, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.False(t, held, "the old epoch writes nothing once superseded")
		st, err := s.Key(ctx, agent, "r", "k")
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyUnknown, st, "a fenced write leaves no record")
		renewed, err = s.Renew(ctx, agent, 1, long)
		require.NoError(t, err)
		assert.False(t, renewed, "the old epoch cannot renew the new one's lease")
		released, err := s.Release(ctx, agent, 1)
		require.NoError(t, err)
		assert.False(t, released, "the old epoch cannot release the new one's lease")
		holder, epoch, _, _, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		assert.Equal(t, "b", holder)
		assert.Equal(t, int64(2), epoch)
	}},
	{"the holder of a current lease takes it again with the next epoch", "again", func(t *testing.T, ctx context.Context, s Store, agent string) {
		// The answer to its first acquisition was lost: it asks again.
		_, err := s.Acquire(ctx, agent, "a", long)
		require.NoError(t, err)
		e, err := s.Acquire(ctx, agent, "a", long)
		require.NoError(t, err)
		assert.Equal(t, int64(2), e, "its own lease is not a reason to wait a lease time")
		held, err := s.SetKey(ctx, agent, 1, 0, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.False(t, held, "the term it lost track of is fenced")
		other, err := s.Acquire(ctx, agent, "b", long)
		require.NoError(t, err)
		assert.Zero(t, other, "another holder still waits")
	}},
	{"a renewal extends the current epoch's lease", "renew", func(t *testing.T, ctx context.Context, s Store, agent string) {
		_, err := s.Acquire(ctx, agent, "a", short)
		require.NoError(t, err)
		ranOut(t, ctx, s, agent)
		e, err := s.Acquire(ctx, agent, "a", time.Minute)
		require.NoError(t, err)
		ok, err := s.Renew(ctx, agent, e, long)
		require.NoError(t, err)
		require.True(t, ok)
		_, _, left, _, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		assert.Greater(t, left, long-time.Minute, "renewed to the new length from now")
		ok, err = s.Renew(ctx, agent, e-1, long)
		require.NoError(t, err)
		assert.False(t, ok, "an older epoch cannot renew")
	}},
	{"a release frees the lease at once and fences its holder", "release", func(t *testing.T, ctx context.Context, s Store, agent string) {
		e, err := s.Acquire(ctx, agent, "a", long)
		require.NoError(t, err)
		ok, err := s.Release(ctx, agent, e)
		require.NoError(t, err)
		require.True(t, ok)
		_, _, left, _, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		assert.Zero(t, left)
		ok, err = s.Release(ctx, agent, e)
		require.NoError(t, err)
		assert.False(t, ok, "a released lease is not released twice")
		held, err := s.SetKey(ctx, agent, e, 0, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.False(t, held, "no write after the release")
		next, err := s.Acquire(ctx, agent, "b", long)
		require.NoError(t, err)
		assert.Equal(t, e+1, next, "taken over at once, with the next epoch")
	}},
	{"a fenced write needs the current epoch and margin of the lease left", "fence", func(t *testing.T, ctx context.Context, s Store, agent string) {
		e, err := s.Acquire(ctx, agent, "a", long)
		require.NoError(t, err)
		held, err := s.SetKey(ctx, agent, e, long-time.Minute, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.True(t, held)
		st, err := s.Key(ctx, agent, "r", "k")
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyIntent, st)
		held, err = s.SetKey(ctx, agent, e, long+time.Minute, "r", "k", bandonce.KeyAccepted)
		require.NoError(t, err)
		assert.False(t, held, "too little of the lease is left for this margin")
		held, err = s.SetKey(ctx, agent, e+1, 0, "r", "k", bandonce.KeyAccepted)
		require.NoError(t, err)
		assert.False(t, held, "an epoch that is not the lease's writes nothing")
		st, err = s.Key(ctx, agent, "r", "k")
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyIntent, st, "refused writes leave the record as it was")
		held, err = s.SetKey(ctx, agent, e, 0, "r", "k", bandonce.KeyAccepted)
		require.NoError(t, err)
		assert.True(t, held)
		st, err = s.Key(ctx, agent, "r", "k")
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyAccepted, st)
	}},
	{"agents' leases are their own", "own", func(t *testing.T, ctx context.Context, s Store, agent string) {
		a, b := agent+"-a", agent+"-b"
		ea, err := s.Acquire(ctx, a, "x", long)
		require.NoError(t, err)
		eb, err := s.Acquire(ctx, b, "y", long)
		require.NoError(t, err)
		assert.Equal(t, int64(1), ea)
		assert.Equal(t, int64(1), eb, "another agent's lease does not block this one")
		held, err := s.SetKey(ctx, b, ea, 0, "r", "k", bandonce.KeyIntent)
		require.NoError(t, err)
		assert.True(t, held, "epoch 1 is b's current epoch too")
		st, err := s.Key(ctx, a, "r", "k")
		require.NoError(t, err)
		assert.Equal(t, bandonce.KeyUnknown, st, "b's record is not a's")
	}},
}

// ranOut waits until the store says agent's lease has run out.
func ranOut(t *testing.T, ctx context.Context, s Store, agent string) {
	t.Helper()
	for range 1000 {
		_, _, left, ok, err := s.Lookup(ctx, agent)
		require.NoError(t, err)
		require.True(t, ok)
		if left <= 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a lease of a microsecond did not run out within a second")
}
