package bandonce_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// BenchmarkMessage carries b.N first deliveries through one room of the
// in-memory fake Band and reports the round trips each one cost (the /next
// that served it and every mark, post and room read), the messages handled
// per second, and the allocations per message (shell and fake together).
func BenchmarkMessage(b *testing.B) {
	benchmarkMessages(b, echo, func(*fakeband.Agent) bandonce.Ledger { return bandonce.NewMemoryLedger() })
}

// BenchmarkMessageDurable is BenchmarkMessage on the durable bbolt ledger,
// with natural keys shared by pairs of messages (the second of each pair
// is decided from the ledger without a room read), and reports the bytes
// and fsyncs the ledger wrote per message.
func BenchmarkMessageDurable(b *testing.B) {
	var ledger *boltledger.Ledger
	benchmarkMessages(b, pairedKeys, func(a *fakeband.Agent) bandonce.Ledger {
		var err error
		ledger, err = boltledger.Open(filepath.Join(b.TempDir(), "bench.ledger"), boltledger.Options{AgentID: a.ID})
		if err != nil {
			b.Fatal(err)
		}
		return ledger
	})
	stats := ledger.Stats()
	b.ReportMetric(float64(stats.BytesWritten)/float64(b.N), "ledger-B/msg")
	b.ReportMetric(float64(stats.Syncs)/float64(b.N), "syncs/msg")
	_ = ledger.Close()
}

// pairedKeys gives messages m0 and m1 one key, m2 and m3 the next, ...
func pairedKeys(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	var n int
	_, _ = fmt.Sscanf(m.Body(), "m%d", &n)
	return &bandonce.Reply{Content: "ok", Mentions: []string{m.SenderID}, DedupKey: fmt.Sprint("pair-", n/2)}, nil
}

func benchmarkMessages(b *testing.B, h bandonce.Handler, ledger func(*fakeband.Agent) bandonce.Ledger) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	room := band.AddRoom("bench", human, agent.ID)
	for i := range b.N {
		if _, err := band.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
			b.Fatal(err)
		}
	}
	trips, elapsed, cpu := serveAll(b, band, bandonce.Config{
		APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(),
		Handler: h, Ledger: ledger(&agent),
	})
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/msg")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
}

// serveAll runs a shell made from cfg (polling, no socket) until it has
// served b.N deliveries, timing that alone, and returns the requests
// the messages cost (messageRequests), the time it took, and the CPU time
// the process spent meanwhile (shell, fake and collector together: on a
// shared machine it varies far less than the time).
func serveAll(b *testing.B, band *fakeband.Band, cfg bandonce.Config) (trips int, elapsed, cpu time.Duration) {
	b.Helper()
	done := make(chan struct{})
	served := 0
	cfg.DisableSocket, cfg.PollInterval = true, time.Hour
	cfg.Hooks.Outcome = func(bandonce.Outcome) {
		if served++; served == b.N {
			close(done)
		}
	}
	shell, err := bandonce.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	before := band.Requests()
	ctx, cancel := context.WithCancel(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	ran := make(chan error, 1)
	go func() { ran <- shell.Run(ctx) }()
	<-done
	elapsed, cpu = time.Since(start), processCPU()-cpu0
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return messageRequests(before, band.Requests(), b.N), elapsed, cpu
}

// messageRequests counts the requests messages cost: everything but
// start-up and the /next polls that found nothing, one /next per message
// served.
func messageRequests(before, after map[fakeband.Endpoint]int, messages int) int {
	trips := messages
	for ep, n := range after {
		switch ep {
		case fakeband.EndpointMe, fakeband.EndpointChats, fakeband.EndpointSocket, fakeband.EndpointNext:
		default:
			trips += n - before[ep]
		}
	}
	return trips
}

// BenchmarkIdleRoom measures what an idle room costs the shell: b.N rooms
// of the in-memory fake, each looked at once and then idle with the
// socket up, and the heap the running shell holds for them (live bytes
// after a collection, less those held before the shell started) per
// room. No goroutine is left to an idle room.
func BenchmarkIdleRoom(b *testing.B) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	for i := range b.N {
		band.AddRoom(fmt.Sprint("room ", i), human, agent.ID)
	}
	before := liveHeap()
	goroutines := runtime.NumGoroutine()
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key, Handler: echo, Logger: slog.New(slog.DiscardHandler),
		BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- shell.Run(ctx) }()
	for band.Requests()[fakeband.EndpointNext] < b.N {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	time.Sleep(50 * time.Millisecond) // the last rounds reach the heap
	held := liveHeap() - before
	extra := runtime.NumGoroutine() - goroutines
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(held)/float64(b.N), "B/idle-room")
	b.ReportMetric(float64(extra), "goroutines")
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkWaitingTurn measures what a turn waiting on a slow handler
// costs the shell: b.N rooms of the in-memory fake with a message each,
// every handler blocked at once (as on a model's answer), and the heap
// and goroutine stacks the shell holds for them then (after a collection,
// less those held before it started), per turn, with the goroutines.
func BenchmarkWaitingTurn(b *testing.B) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	for i := range b.N {
		room := band.AddRoom(fmt.Sprint("room ", i), human, agent.ID)
		if _, err := band.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
			b.Fatal(err)
		}
	}
	var waiting, served atomic.Int64
	release, allServed := make(chan struct{}), make(chan struct{})
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key, Logger: slog.New(slog.DiscardHandler),
		BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), DisableSocket: true, PollInterval: time.Hour,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			waiting.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			return echo(ctx, m)
		},
		Hooks: bandonce.Hooks{Outcome: func(bandonce.Outcome) {
			if served.Add(1) == int64(b.N) {
				close(allServed)
			}
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	before, stacks := liveHeap(), stackInUse()
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- shell.Run(ctx) }()
	for waiting.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	heap, stack := liveHeap()-before, stackInUse()-stacks
	held := heap + stack
	b.ReportMetric(float64(stack)/float64(b.N), "stack-B/turn")
	extra := runtime.NumGoroutine() - goroutines
	close(release)
	<-allServed
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(held)/float64(b.N), "B/waiting-turn")
	b.ReportMetric(float64(extra)/float64(b.N), "goroutines/turn")
}

func stackInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}
