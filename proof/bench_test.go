package proof

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
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
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(requests.Load()), "ns/request")
}

// BenchmarkRequestFloor is what a request costs the prover with nothing
// behind it: a client's http.Client.Do in a synctest bubble, parked in a
// RoundTripper until a driver, after synctest.Wait, releases it, and an
// empty answer, on GOMAXPROCS bubbles at once as the prover runs them. A
// schedule's requests cost at least this each, before the shell, the
// fake or JSON do anything (docs/performance.md).
func BenchmarkRequestFloor(b *testing.B) {
	parent := &testing.T{}
	const perBubble = 50
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			synctest.Test(parent, func(*testing.T) {
				rt := floorTransport{park: make(chan chan struct{}, 1)}
				c := &http.Client{Transport: rt}
				done := make(chan error, 1)
				go func() {
					done <- floorClient(c, perBubble)
				}()
				for range perBubble {
					synctest.Wait()
					close(<-rt.park)
				}
				if err := <-done; err != nil {
					b.Error(err)
				}
			})
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBubble), "ns/request")
}

func floorClient(c *http.Client, n int) error {
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://band.test/api/v1/agent/chats/1e0f1083-06fb-4008-8cd4-000000000009/messages/next", nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// floorTransport parks each request until the driver closes its channel.
type floorTransport struct{ park chan chan struct{} }

func (f floorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v := make(chan struct{})
	f.park <- v
	<-v
	return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}
