package pgledger

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// BenchmarkMessage carries b.N first deliveries through one room of the
// in-memory fake Band, as the root package's BenchmarkMessage does, with
// each of the three ledgers side by side: memory, bbolt (a file, fsynced)
// and PostgreSQL (through RunLeader, fenced). It reports the round trips
// to Band per message, the ledger's durable commits per message (bbolt
// fsyncs each twice; PostgreSQL flushes its WAL once), PostgreSQL's
// statements per message (the commits and the reads), messages per second
// and allocations (shell, fake and driver together). The lease's own
// renewals are per time, not per message, and not counted.
func BenchmarkMessage(b *testing.B) {
	b.Run("ledger=memory", func(b *testing.B) {
		benchmarkMessages(b, func(ctx context.Context, _ string, serve func(context.Context, bandonce.Ledger) error) error {
			return serve(ctx, bandonce.NewMemoryLedger())
		}, nil)
	})
	b.Run("ledger=bolt", func(b *testing.B) {
		var ledger *boltledger.Ledger
		benchmarkMessages(b, func(ctx context.Context, agentID string, serve func(context.Context, bandonce.Ledger) error) error {
			var err error
			ledger, err = boltledger.Open(filepath.Join(b.TempDir(), "bench.ledger"), boltledger.Options{AgentID: agentID})
			if err != nil {
				return err
			}
			defer ledger.Close()
			return serve(ctx, ledger)
		}, func() (statements, commits int64) { return -1, ledger.Stats().Syncs })
	})
	b.Run("ledger=pg", func(b *testing.B) {
		db := newTestDB(b)
		var ledger *Ledger
		benchmarkMessages(b, func(ctx context.Context, agentID string, serve func(context.Context, bandonce.Ledger) error) error {
			s, err := Open(ctx, db.pool, Options{AgentID: agentID, Schema: db.schema, Logger: quiet})
			if err != nil {
				return err
			}
			return s.RunLeader(ctx, func(ctx context.Context, l *Ledger) error {
				ledger = l
				return serve(ctx, l)
			})
		}, func() (statements, commits int64) { st := ledger.Stats(); return st.Reads + st.Writes, st.Writes })
	})
}

// benchmarkMessages runs the shell with the ledger with provides until it
// done b.N messages; stats, if set, says what the ledger did: the
// statements it sent (-1: it sends none) and the writes it committed.
func benchmarkMessages(b *testing.B,
	with func(ctx context.Context, agentID string, serve func(context.Context, bandonce.Ledger) error) error,
	stats func() (statements, commits int64),
) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	room := band.AddRoom("bench", human, agent.ID)
	for i := range b.N {
		if _, err := band.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := 0
	serve := func(ctx context.Context, ledger bandonce.Ledger) error {
		shell, err := bandonce.New(bandonce.Config{
			APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(),
			Handler: func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
				return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
			},
			DisableSocket: true, PollInterval: time.Hour, Ledger: ledger, Logger: quiet,
			Hooks: bandonce.Hooks{Outcome: func(bandonce.Outcome) {
				if done++; done == b.N {
					cancel()
				}
			}},
		})
		if err != nil {
			return err
		}
		return shell.Run(ctx)
	}
	before := band.Requests()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := with(ctx, agent.ID, serve); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if done < b.N {
		b.Fatalf("done %d of %d messages", done, b.N)
	}
	after := band.Requests()
	trips := b.N // the /next that served each message
	for ep, n := range after {
		switch ep {
		case fakeband.EndpointMe, fakeband.EndpointChats, fakeband.EndpointSocket, fakeband.EndpointNext:
		default:
			trips += n - before[ep]
		}
	}
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/msg")
	if stats != nil {
		statements, commits := stats()
		if statements >= 0 {
			b.ReportMetric(float64(statements)/float64(b.N), "pg-statements/msg")
		}
		b.ReportMetric(float64(commits)/float64(b.N), "commits/msg")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}
