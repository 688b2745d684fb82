package bandonce_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// benchShell runs a shell with the socket over the in-memory transport, in
// real time, until the benchmark ends. The shell's client goes through
// watch, which may be nil.
func benchShell(b *testing.B, band *fakeband.Band, agent fakeband.Agent, h bandonce.Handler, watch func(*http.Request, *http.Response)) {
	client := band.HTTPClient()
	if watch != nil {
		client = &http.Client{Transport: &watchTransport{next: client.Transport, watch: watch}}
	}
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key, BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: client,
		Handler: h, ResyncInterval: time.Hour, Retry: bandonce.RetryPolicy{Seed: 7},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- shell.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			b.Error(err)
		}
	})
	for band.Requests()[fakeband.EndpointSocket] == 0 {
		time.Sleep(time.Millisecond)
	}
}

// watchTransport shows every response to watch before the shell sees it.
type watchTransport struct {
	next  http.RoundTripper
	watch func(*http.Request, *http.Response)
}

func (t *watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.watch(req, resp)
	}
	return resp, err
}

// reportPercentiles reports the median and the 99th percentile of samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(samples[(len(samples)-1)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkControlToCancel measures how long an interrupt takes to cancel
// the handler's context. The clock starts at the call to band.Interrupt,
// which pushes the frame (timestamping the push itself is not possible
// from outside the fake), and stops when the handler sees ctx.Done(): the
// fake's write, the socket, the shell's parse, dedup, routing and cancel.
func BenchmarkControlToCancel(b *testing.B) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	b.Cleanup(func() { _ = band.Close() }) // after the shell stops
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	room := band.AddRoom("bench", human, agent.ID)
	entered := make(chan struct{})
	cancelled := make(chan time.Time)
	benchShell(b, band, agent, func(ctx context.Context, _ *bandonce.Message) (*bandonce.Reply, error) {
		entered <- struct{}{}
		<-ctx.Done()
		cancelled <- time.Now()
		return nil, nil
	}, nil)

	// Warm up until a push reaches the shell: its socket is joined.
	say := func() {
		if _, err := band.Say(room.ID, human.ID, "work", agent.ID); err != nil {
			b.Fatal(err)
		}
		<-entered
	}
	say()
	for warm := false; !warm; {
		if err := band.Interrupt(agent.ID, room.ID); err != nil {
			b.Fatal(err)
		}
		select {
		case <-cancelled:
			warm = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	// An interrupt sent just before the cancel was seen may still be on
	// its way; let it land now, while no cycle is in flight, rather than
	// on the first timed message (which it would consume unhandled).
	time.Sleep(100 * time.Millisecond)

	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		say()
		start := time.Now()
		if err := band.Interrupt(agent.ID, room.ID); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, (<-cancelled).Sub(start))
	}
	b.StopTimer()
	reportPercentiles(b, samples)
}

// BenchmarkWakeToHandler measures how long a new message takes to reach
// the handler of an idle room. The clock starts at the call to band.Say,
// which stores the message and pushes message_created, and stops when the
// handler is entered: the push, the wake, /next and the processing mark.
func BenchmarkWakeToHandler(b *testing.B) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	b.Cleanup(func() { _ = band.Close() }) // after the shell stops
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	room := band.AddRoom("bench", human, agent.ID)

	// The room is idle once a /next has answered 204; idleTick wakes a
	// waiter after each such answer.
	var idle atomic.Int64
	idleTick := make(chan struct{}, 1)
	watch := func(req *http.Request, resp *http.Response) {
		if strings.HasSuffix(req.URL.Path, "/messages/next") && resp.StatusCode == http.StatusNoContent {
			idle.Add(1)
			select {
			case idleTick <- struct{}{}:
			default:
			}
		}
	}
	type entry struct {
		at        time.Time
		idleAtRun int64
	}
	entered := make(chan entry)
	benchShell(b, band, agent, func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
		entered <- entry{at: time.Now(), idleAtRun: idle.Load()}
		return nil, nil
	}, watch)
	waitIdleAfter := func(n int64) {
		for idle.Load() <= n {
			<-idleTick
		}
	}

	// Warm up until a message arrives by push rather than by the first
	// polls, which run before the socket is joined.
	last := entry{}
	for warm := 0; warm < 3; warm++ {
		if _, err := band.Say(room.ID, human.ID, "warm", agent.ID); err != nil {
			b.Fatal(err)
		}
		last = <-entered
		waitIdleAfter(last.idleAtRun)
	}

	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := band.Say(room.ID, human.ID, "work", agent.ID); err != nil {
			b.Fatal(err)
		}
		last = <-entered
		samples = append(samples, last.at.Sub(start))
		b.StopTimer()
		waitIdleAfter(last.idleAtRun) // the next message finds the room waiting again
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, samples)
}
