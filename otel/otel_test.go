package bandonceotel_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	bandonceotel "github.com/band-once/bandonce/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// telemetry is an in-memory meter and tracer, read back by the tests.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	opts   []bandonceotel.Option
}

func newTelemetry() *telemetry {
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	return &telemetry{
		reader: reader,
		spans:  spans,
		opts: []bandonceotel.Option{
			bandonceotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
			bandonceotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))),
		},
	}
}

// value sums the points of an int64 metric whose attributes include attrs
// (a histogram gives its count). ok is false when the metric is absent.
func (tm *telemetry) value(t *testing.T, name string, attrs ...attribute.KeyValue) (n int64, ok bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	matches := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, has := set.Value(kv.Key); !has || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, bandonceotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			ok = true
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					if matches(p.Attributes) {
						n += p.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					if matches(p.Attributes) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					if matches(p.Attributes) {
						n += int64(p.Count)
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return n, ok
}

func (tm *telemetry) must(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	n, ok := tm.value(t, name, attrs...)
	require.True(t, ok, "metric %s recorded", name)
	return n
}

// world is a fake Band with one agent in one room.
type world struct {
	band  *fakeband.Band
	agent fakeband.Agent
	ada   fakeband.Human
	room  fakeband.Room
}

func newWorld(t *testing.T) *world {
	band := fakeband.New(fakeband.Options{})
	t.Cleanup(func() { _ = band.Close() })
	w := &world{band: band, agent: band.AddAgent("echo"), ada: band.AddHuman("ada")}
	w.room = band.AddRoom("demo", w.ada, w.agent.ID)
	return w
}

func (w *world) say(t *testing.T, text string) string {
	t.Helper()
	id, err := w.band.Say(w.room.ID, w.ada.ID, text, w.agent.ID)
	require.NoError(t, err)
	return id
}

func (w *world) config(h bandonce.Handler) bandonce.Config {
	return bandonce.Config{
		APIKey: w.agent.Key, BaseURL: w.band.BaseURL(), SocketURL: w.band.SocketURL(), HTTPClient: w.band.HTTPClient(),
		Handler: h, Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: time.Second,
		Retry: bandonce.RetryPolicy{Seed: 3},
	}
}

// One run with every kind of event: replies, a 429 and its retry, a lost
// post the guard finds, an interrupt, a shutdown mid-handler. The metrics
// count each; the spans nest as a trace viewer shows them.
func TestMetricsAndSpansOfARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		tm := newTelemetry()
		started := make(chan struct{}, 8)
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			// The handler's own span, as an agent's LLM call would make.
			_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("agent").Start(ctx, "agent.work")
			defer span.End()
			started <- struct{}{}
			if strings.HasPrefix(m.Body(), "slow") {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}
			time.Sleep(2 * time.Second)
			return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
		})
		outcomes := 0
		cfg.Hooks.Outcome = func(bandonce.Outcome) { outcomes++ } // kept by Instrument
		require.NoError(t, bandonceotel.Instrument(&cfg, tm.opts...))

		shell, err := bandonce.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- shell.Run(ctx) }()
		synctest.Wait()
		assert.Equal(t, int64(1), tm.must(t, "bandonce.rooms"))
		assert.Equal(t, int64(1), tm.must(t, "bandonce.socket.connected"))

		// A reply whose processed mark is throttled once.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Kind: fakeband.FailBefore, Status: 429, EmptyBody: true})
		plain := w.say(t, "hello")
		<-started
		time.Sleep(time.Minute)
		synctest.Wait()
		// A reply whose POST answer is lost: the guard finds it.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
		w.say(t, "lost")
		<-started
		time.Sleep(time.Minute)
		synctest.Wait()
		// An interrupt.
		w.say(t, "slow one")
		<-started
		synctest.Wait()
		require.NoError(t, w.band.Interrupt(w.agent.ID, w.room.ID))
		synctest.Wait()
		// A shutdown while a handler runs.
		w.say(t, "slow two")
		<-started
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)

		outcome := func(k bandonce.OutcomeKind) int64 {
			n, _ := tm.value(t, "bandonce.messages", attribute.String("bandonce.outcome", k.String()))
			return n
		}
		assert.Equal(t, int64(1), outcome(bandonce.Replied))
		assert.Equal(t, int64(1), outcome(bandonce.DuplicateDropped))
		assert.Equal(t, int64(1), outcome(bandonce.Interrupted))
		assert.Equal(t, 3, outcomes, "the caller's own hook still runs")

		result := func(r string) int64 {
			n, _ := tm.value(t, "bandonce.handler.duration", attribute.String("bandonce.handler.result", r))
			return n
		}
		assert.Equal(t, int64(2), result("ok"))
		assert.Equal(t, int64(1), result("interrupted"))
		assert.Equal(t, int64(1), result("shutdown"))
		assert.Equal(t, int64(0), tm.must(t, "bandonce.handler.active"))

		assert.Equal(t, int64(1), tm.must(t, "bandonce.guard.reads", attribute.String("bandonce.guard.result", "found")))
		processed := attribute.String("bandonce.endpoint", "POST /agent/chats/{id}/messages/{message_id}/processed")
		assert.Equal(t, int64(1), tm.must(t, "bandonce.request.throttled", processed))
		assert.Equal(t, int64(1), tm.must(t, "bandonce.request.retries", processed))
		assert.Equal(t, int64(1), tm.must(t, "bandonce.requests", processed, attribute.Int("http.response.status_code", 429)))
		assert.Positive(t, tm.must(t, "bandonce.requests", attribute.String("bandonce.endpoint", "GET /agent/me")))
		assert.Positive(t, tm.must(t, "bandonce.request.duration", attribute.String("bandonce.endpoint", "GET /agent/me")))
		assert.Equal(t, int64(1), tm.must(t, "bandonce.control.signals",
			attribute.String("bandonce.control.mode", "interrupt"), attribute.Bool("bandonce.control.in_flight", true)))
		assert.Equal(t, int64(0), tm.must(t, "bandonce.rooms"), "every room let go at shutdown")
		assert.Equal(t, int64(0), tm.must(t, "bandonce.socket.connected"))
		assert.Equal(t, int64(1), tm.must(t, "bandonce.socket.disconnects"))

		// The spans: one per delivery, the handler's inside it, the
		// handler's own work inside that, and each request of the delivery.
		ended := tm.spans.Ended()
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		var deliveries []sdktrace.ReadOnlySpan
		for _, s := range ended {
			byID[s.SpanContext().SpanID()] = s
			if s.Name() == "bandonce.delivery" {
				deliveries = append(deliveries, s)
			}
		}
		require.Len(t, deliveries, 4)
		attr := func(s sdktrace.ReadOnlySpan, key string) attribute.Value {
			for _, kv := range s.Attributes() {
				if string(kv.Key) == key {
					return kv.Value
				}
			}
			return attribute.Value{}
		}
		var first sdktrace.ReadOnlySpan
		for _, d := range deliveries {
			if attr(d, "bandonce.message.id").AsString() == plain {
				first = d
			}
		}
		require.NotNil(t, first)
		assert.Equal(t, "replied", attr(first, "bandonce.outcome").AsString())
		assert.Equal(t, int64(1), attr(first, "bandonce.attempt").AsInt64())
		assert.Equal(t, w.room.ID, attr(first, "bandonce.room.id").AsString())
		var children []string
		for _, s := range ended {
			if s.Parent().SpanID() == first.SpanContext().SpanID() {
				children = append(children, s.Name())
				if s.Name() == "bandonce.handler" {
					assert.Equal(t, "ok", attr(s, "bandonce.handler.result").AsString())
					assert.Equal(t, 2*time.Second, s.EndTime().Sub(s.StartTime()))
				}
			}
			if s.Name() == "agent.work" {
				parent := byID[s.Parent().SpanID()]
				require.NotNil(t, parent, "the handler's span is recorded")
				assert.Equal(t, "bandonce.handler", parent.Name(), "the handler's spans nest in the handler span")
			}
		}
		assert.Equal(t, []string{
			"POST /agent/chats/{id}/messages/{message_id}/processing",
			"bandonce.handler",
			"POST /agent/chats/{id}/messages",
			"POST /agent/chats/{id}/messages/{message_id}/processed",
			"POST /agent/chats/{id}/messages/{message_id}/processed",
		}, children)

		outcomesSeen := map[string]int{}
		for _, d := range deliveries {
			outcomesSeen[attr(d, "bandonce.outcome").AsString()]++
			assert.NotEqual(t, codes.Error, d.Status().Code)
		}
		assert.Equal(t, map[string]int{"replied": 1, "duplicate-dropped": 1, "interrupted": 1, "none": 1}, outcomesSeen)
	})
}

// A failure sets the delivery span's status, and a dead letter is counted
// by outcome.
func TestAFailedDeliveryIsAnErrorSpan(t *testing.T) {
	w := newWorld(t)
	tm := newTelemetry()
	w.say(t, "doomed")
	cfg := w.config(func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
		return nil, bandonce.Permanent(assert.AnError)
	})
	cfg.DisableSocket = true
	require.NoError(t, bandonceotel.Instrument(&cfg, tm.opts...))
	shell, err := bandonce.New(cfg)
	require.NoError(t, err)
	_, err = shell.Drain(context.Background())
	require.NoError(t, err)

	assert.Equal(t, int64(1), tm.must(t, "bandonce.messages", attribute.String("bandonce.outcome", "dead-lettered")))
	assert.Equal(t, int64(1), tm.must(t, "bandonce.handler.duration", attribute.String("bandonce.handler.result", "error")))
	var errored int
	for _, s := range tm.spans.Ended() {
		if s.Status().Code == codes.Error {
			errored++
			assert.Contains(t, []string{"bandonce.delivery", "bandonce.handler"}, s.Name())
		}
	}
	assert.Equal(t, 2, errored)
}

// gauge is the last value of a float64 gauge, and whether it was recorded.
func (tm *telemetry) gauge(t *testing.T, name string) (float64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == name && len(g.DataPoints) > 0 {
				return g.DataPoints[len(g.DataPoints)-1].Value, true
			}
		}
	}
	return 0, false
}

// A 429 makes the shell pace every request: the gauges say so, with the
// pace, until Band has gone half a minute without one.
func TestThePaceOfAThrottledAgentIsAGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		tm := newTelemetry()
		cfg := w.config(func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
		})
		require.NoError(t, bandonceotel.Instrument(&cfg, tm.opts...))
		shell, err := bandonce.New(cfg)
		require.NoError(t, err)
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.FailBefore, Status: 429, EmptyBody: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- shell.Run(ctx) }()
		w.say(t, "one")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, int64(1), tm.must(t, "bandonce.request.paced"))
		pace, ok := tm.gauge(t, "bandonce.request.pace")
		assert.True(t, ok)
		assert.Positive(t, pace)

		time.Sleep(time.Minute)
		w.say(t, "two") // accepted, half a minute after the 429
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, int64(0), tm.must(t, "bandonce.request.paced"), "lifted")
		pace, _ = tm.gauge(t, "bandonce.request.pace")
		assert.Zero(t, pace)
		cancel()
		require.NoError(t, <-done)
	})
}

// A Step is a span of its own inside the handler's span, saying whether it
// ran or was replayed from the ledger.
func TestAStepIsASpanInsideItsHandlersSpan(t *testing.T) {
	w := newWorld(t)
	tm := newTelemetry()
	w.say(t, "refund order 17")
	calls := 0
	cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		calls++
		if _, err := m.Step(ctx, "refund", func(context.Context, string) ([]byte, error) { return []byte("re_1"), nil }); err != nil {
			return nil, err
		}
		if calls == 1 {
			return nil, errors.New("the model API timed out") // the next delivery replays the step
		}
		return &bandonce.Reply{Content: "refunded"}, nil
	})
	cfg.DisableSocket = true
	cfg.Backoff = bandonce.Backoff{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	require.NoError(t, bandonceotel.Instrument(&cfg, tm.opts...))
	shell, err := bandonce.New(cfg)
	require.NoError(t, err)
	_, err = shell.Drain(context.Background())
	require.NoError(t, err)

	handlers := map[trace.SpanID]bool{}
	for _, s := range tm.spans.Ended() {
		if s.Name() == "bandonce.handler" {
			handlers[s.SpanContext().SpanID()] = true
		}
	}
	var replayed []bool
	for _, s := range tm.spans.Ended() {
		if s.Name() != "bandonce.step" {
			continue
		}
		assert.True(t, handlers[s.Parent().SpanID()], "a child of its handler's span")
		attrs := attribute.NewSet(s.Attributes()...)
		name, _ := attrs.Value("bandonce.step.name")
		assert.Equal(t, "refund", name.AsString())
		key, _ := attrs.Value("bandonce.step.idempotency_key")
		assert.NotEmpty(t, key.AsString())
		r, _ := attrs.Value("bandonce.step.replayed")
		replayed = append(replayed, r.AsBool())
	}
	assert.Equal(t, []bool{false, true}, replayed, "run at the first delivery, replayed from the ledger at the second")
}
