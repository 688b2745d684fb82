package proof

import (
	"sync/atomic"
	"testing"
)

// BenchmarkSchedule runs random schedules on GOMAXPROCS workers, as the
// prover does, and reports the throughput the receipt quotes.
//
// Every schedule runs in a synctest bubble, which wants a *testing.T as
// its parent; a benchmark has none, so it lends the bubbles a zero T, of
// which they use nothing but the parent link.
func BenchmarkSchedule(b *testing.B) {
	parent := &testing.T{}
	var seed, requests atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := Simulate(parent, Random(20260616+seed.Add(1), GenOptions{}), Options{})
			requests.Add(int64(r.Requests))
		}
	})
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/secs, "schedules/s")
	b.ReportMetric(float64(requests.Load())/secs, "requests/s")
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/schedule")
}
