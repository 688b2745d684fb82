package bandonceotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	bandonceotel "github.com/band-once/bandonce/otel"
)

// The shell's metrics on a Prometheus /metrics page: a MeterProvider with
// the Prometheus exporter, and one Instrument call. In a real agent the
// Config comes from bandonce.ConfigFromEnv(os.Getenv) and the page is
// served with http.Handle("/metrics", promhttp.HandlerFor(registry, ...)).
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = meters.Shutdown(context.Background()) }()

	// The agent, here on the in-process fake Band, with two messages waiting.
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	for _, text := range []string{"hello", "again"} {
		if _, err := band.Say(room.ID, ada.ID, text, agent.ID); err != nil {
			panic(err)
		}
	}
	cfg := bandonce.Config{
		APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), DisableSocket: true,
		Logger: slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
		},
	}
	if err := bandonceotel.Instrument(&cfg, bandonceotel.WithMeterProvider(meters)); err != nil {
		panic(err)
	}
	shell, err := bandonce.New(cfg)
	if err != nil {
		panic(err)
	}
	if _, err := shell.Drain(context.Background()); err != nil {
		panic(err)
	}

	// What Prometheus scrapes.
	page := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(page, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.SplitSeq(page.Body.String(), "\n") {
		for _, name := range []string{"bandonce_messages_total", "bandonce_handler_duration_seconds_count", "bandonce_rooms "} {
			if strings.HasPrefix(line, name) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// bandonce_handler_duration_seconds_count{bandonce_handler_result="ok"} 2
	// bandonce_messages_total{bandonce_outcome="replied"} 2
	// bandonce_rooms 0
}
