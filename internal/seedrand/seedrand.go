// Package seedrand draws the kill-storm engines' schedules from seeds
// (package proof, internal/procverify and package verify): the same seed
// always draws the same schedule, and nearby seeds (master+i) draw
// unrelated ones.
package seedrand

import (
	"math/rand/v2"
	"time"
)

// Rand is a seeded generator with the two draws every schedule builder
// makes besides math/rand's own.
type Rand struct{ *rand.Rand }

// New returns the generator for seed, spread with splitmix64 so that
// nearby seeds give unrelated streams.
func New(seed uint64) Rand {
	mix := splitmix64(seed)
	return Rand{rand.New(rand.NewPCG(mix, splitmix64(mix)))}
}

// Named is New for seed with name mixed in first, so that two checks run
// from one seed draw different schedules.
func Named(seed int64, name string) Rand {
	h := uint64(1469598103934665603)
	for _, c := range name {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return New(h ^ uint64(seed))
}

// splitmix64 spreads nearby seeds over the whole space.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Between draws an int in [lo, hi].
func (r Rand) Between(lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// Duration draws a duration in [lo, hi].
func (r Rand) Duration(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
