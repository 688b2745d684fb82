package bandonceotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	bandonceotel "github.com/band-once/bandonce/otel"
)

// BenchmarkMessage carries b.N messages through one room of the in-memory
// fake Band, without instrumentation and with the SDK's meter and tracer
// (every span recorded), and reports messages per second and the
// allocations per message, shell and fake together: the difference is
// what Instrument costs.
func BenchmarkMessage(b *testing.B) {
	for _, instrumented := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "otel"}[instrumented], func(b *testing.B) {
			band := fakeband.New(fakeband.Options{Seed: 1})
			defer band.Close()
			agent, human := band.AddAgent("bench"), band.AddHuman("ada")
			room := band.AddRoom("bench", human, agent.ID)
			for i := range b.N {
				if _, err := band.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
					b.Fatal(err)
				}
			}
			done := make(chan struct{})
			ended := 0
			cfg := bandonce.Config{
				APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(),
				DisableSocket: true, PollInterval: time.Hour, Logger: slog.New(slog.DiscardHandler),
				Handler: func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
					return &bandonce.Reply{Content: "ok", Mentions: []string{m.SenderID}}, nil
				},
				Hooks: bandonce.Hooks{Outcome: func(bandonce.Outcome) {
					if ended++; ended == b.N {
						close(done)
					}
				}},
			}
			if instrumented {
				meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				tracers := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
				if err := bandonceotel.Instrument(&cfg, bandonceotel.WithMeterProvider(meters), bandonceotel.WithTracerProvider(tracers)); err != nil {
					b.Fatal(err)
				}
			}
			shell, err := bandonce.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			ran := make(chan error, 1)
			go func() { ran <- shell.Run(ctx) }()
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
