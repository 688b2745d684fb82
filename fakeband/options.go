package fakeband

import (
	"fmt"
	"time"
)

// Options configures a Band.
type Options struct {
	// Seed seeds ids and probabilistic faults: the same seed and the same
	// calls in the same order give the same ids and fire the same faults.
	Seed int64

	// Now stamps inserted_at and updated_at. Nil means a deterministic
	// clock that starts at DefaultStart and advances one second per reading.
	Now func() time.Time

	// Admin serves the admin API (see AdminPrefix) beside the REST API, on
	// Handler, Listen and HTTPClient alike, with the console (a page at /
	// that drives it, see console.go) and its live feed. It has no
	// authentication: it hands out every key, so serve it on loopback
	// only. False (the default) leaves it out, and keeps no request log.
	Admin bool

	// RateLimit, if set, throttles each agent's REST calls from the start
	// (see RateLimit; an invalid one is ignored, as SetRateLimit would
	// refuse it). Band.SetRateLimit and fault plans change it later.
	RateLimit *RateLimit
}

// DefaultStart is the first reading of the default clock.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// steppingClock returns DefaultStart, then one second later on every call,
// so timestamps are ordered and reproducible without reading wall time.
func steppingClock() func() time.Time {
	var n int64
	return func() time.Time {
		t := DefaultStart.Add(time.Duration(n) * time.Second)
		n++
		return t
	}
}

// ids hands out unique, reproducible identifiers. Uniqueness comes from
// the counter in the last group of each UUID; the seed only changes how
// the rest looks, so two Bands with different seeds do not share ids.
type ids struct {
	seed uint64
	n    uint64
}

// mix64 is the SplitMix64 finalizer: a cheap bijective scramble.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// uuid returns the next id as a version-4-shaped UUID string.
func (g *ids) uuid() string {
	g.n++
	head := mix64(g.seed + g.n)
	tail := mix64(g.seed ^ 0x9e3779b97f4a7c15)
	// "%08x-%04x-4%03x-8%03x-%012x" without fmt, which was a tenth of a
	// stored message's cost.
	var b [36]byte
	hexInto(b[0:8], head>>32)
	b[8] = '-'
	hexInto(b[9:13], tail>>48)
	b[13], b[14] = '-', '4'
	hexInto(b[15:18], (tail>>32)&0xfff)
	b[18], b[19] = '-', '8'
	hexInto(b[20:23], (tail>>16)&0xfff)
	b[23] = '-'
	hexInto(b[24:36], g.n&0xffffffffffff)
	return string(b[:])
}

// hexInto writes v's low len(dst) hex digits into dst, zero-padded.
func hexInto(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}

// key returns the next API key with the given prefix (band_a_ or band_u_).
func (g *ids) key(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%016x%06x", prefix, mix64(g.seed^g.n), g.n)
}
