// Package bandonceotel wires a bandonce.Shell to OpenTelemetry in one line:
//
//	cfg, err := bandonce.ConfigFromEnv(os.Getenv)
//	...
//	if err := bandonceotel.Instrument(&cfg); err != nil { ... }
//	shell, err := bandonce.New(cfg)
//
// Instrument sets the Config's Hooks (keeping any already set, which it
// calls after its own) so that the shell records the metrics and spans
// below through the global MeterProvider and TracerProvider, or the ones
// WithMeterProvider and WithTracerProvider give. The root package bandonce
// does not depend on OpenTelemetry; only an agent that imports this
// package does.
//
// # Metrics
//
//	bandonce.messages            counter    deliveries, by bandonce.outcome
//	bandonce.handler.duration    histogram  seconds per handler call, by bandonce.handler.result
//	bandonce.handler.active      up-down    handlers running now
//	bandonce.guard.reads         counter    room reads by the dedup guard, by bandonce.guard.result
//	bandonce.requests            counter    HTTP attempts to Band, by bandonce.endpoint and http.response.status_code
//	bandonce.request.duration    histogram  seconds per attempt, by bandonce.endpoint
//	bandonce.request.retries     counter    attempts after a call's first, by bandonce.endpoint
//	bandonce.request.throttled   counter    429 answers, by bandonce.endpoint
//	bandonce.request.paced       gauge      1 while Band's 429s pace every request of the agent, else 0
//	bandonce.request.pace        gauge      that pace, in requests a second (0 once lifted)
//	bandonce.control.signals     counter    control signals applied, by bandonce.control.mode
//	bandonce.socket.connected    gauge      1 while the socket is up, else 0
//	bandonce.socket.disconnects  counter    connections that ended
//	bandonce.rooms               up-down    rooms being served
//
// Room and message ids are never metric attributes (one series per room
// would grow without bound); they are on the spans.
//
// # Traces
//
// Each delivery is a span, "bandonce.delivery", from /next serving the
// message to its outcome, with the room and message ids, the attempt and
// the outcome; a failure or a dead letter sets its status to Error. Inside
// it: a "bandonce.handler" span for the handler call, whose context the
// Handler gets, so the spans the handler starts are its children; a span
// per HTTP attempt the shell made for the delivery, named by its endpoint;
// an event per read of the room by the guard; and a "bandonce.step" span
// per Message.Step, with its name, idempotency key, whether its result was
// replayed from the ledger, and its error.
package bandonceotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/band-once/bandonce"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/band-once/bandonce/otel"

// Option configures Instrument.
type Option func(*options)

type options struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

// WithMeterProvider records metrics through mp instead of the global
// MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meters = mp }
}

// WithTracerProvider records spans through tp instead of the global
// TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracers = tp }
}

// Instrument sets cfg.Hooks to record metrics and spans, keeping the hooks
// already there: each is called after the instrumentation's own, with the
// context it derived. It fails only if an instrument cannot be created.
func Instrument(cfg *bandonce.Config, opts ...Option) error {
	o := options{meters: otel.GetMeterProvider(), tracers: otel.GetTracerProvider()}
	for _, opt := range opts {
		opt(&o)
	}
	in, err := newInstruments(o.meters.Meter(ScopeName), o.tracers.Tracer(ScopeName))
	if err != nil {
		return err
	}
	cfg.Hooks = in.hooks(cfg.Hooks)
	return nil
}

// instruments are the metrics and the tracer one Instrument call made.
type instruments struct {
	tracer trace.Tracer

	messages         metric.Int64Counter
	handlerDuration  metric.Float64Histogram
	handlerActive    metric.Int64UpDownCounter
	guardReads       metric.Int64Counter
	requests         metric.Int64Counter
	requestDuration  metric.Float64Histogram
	retries          metric.Int64Counter
	throttled        metric.Int64Counter
	signals          metric.Int64Counter
	socketConnected  metric.Int64Gauge
	paced            metric.Int64Gauge
	pace             metric.Float64Gauge
	socketDisconnect metric.Int64Counter
	rooms            metric.Int64UpDownCounter
}

func newInstruments(m metric.Meter, tracer trace.Tracer) (*instruments, error) {
	in := &instruments{tracer: tracer}
	var errs []error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		*dst = c
		errs = append(errs, err)
	}
	upDown := func(dst *metric.Int64UpDownCounter, name, unit, desc string) {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		*dst = c
		errs = append(errs, err)
	}
	seconds := func(dst *metric.Float64Histogram, name, desc string, bounds ...float64) {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		*dst = h
		errs = append(errs, err)
	}
	counter(&in.messages, "bandonce.messages", "{message}", "Deliveries, by outcome.")
	seconds(&in.handlerDuration, "bandonce.handler.duration", "How long each handler call took.",
		0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
	upDown(&in.handlerActive, "bandonce.handler.active", "{handler}", "Handler calls running now.")
	counter(&in.guardReads, "bandonce.guard.reads", "{read}", "Reads of the room by the dedup guard, by result.")
	counter(&in.requests, "bandonce.requests", "{request}", "HTTP attempts to Band's REST API, retries included.")
	seconds(&in.requestDuration, "bandonce.request.duration", "How long each HTTP attempt took, until the answer's headers.",
		0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
	counter(&in.retries, "bandonce.request.retries", "{request}", "HTTP attempts after a call's first.")
	counter(&in.throttled, "bandonce.request.throttled", "{request}", "HTTP attempts Band answered with 429.")
	counter(&in.signals, "bandonce.control.signals", "{signal}", "Control signals applied, per room.")
	g, err := m.Int64Gauge("bandonce.socket.connected", metric.WithUnit("1"), metric.WithDescription("1 while the socket is connected, else 0."))
	in.socketConnected = g
	errs = append(errs, err)
	paced, err := m.Int64Gauge("bandonce.request.paced", metric.WithUnit("1"),
		metric.WithDescription("1 while Band's 429s make the shell pace every request it sends, else 0."))
	in.paced = paced
	errs = append(errs, err)
	pace, err := m.Float64Gauge("bandonce.request.pace", metric.WithUnit("{request}/s"),
		metric.WithDescription("The pace of the shell's requests while Band throttles the agent; 0 once lifted."))
	in.pace = pace
	errs = append(errs, err)
	counter(&in.socketDisconnect, "bandonce.socket.disconnects", "{disconnect}", "Socket connections that ended.")
	upDown(&in.rooms, "bandonce.rooms", "{room}", "Rooms being served.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return in, nil
}

// Attribute keys.
const (
	keyOutcome       = attribute.Key("bandonce.outcome")
	keyHandlerResult = attribute.Key("bandonce.handler.result")
	keyGuardResult   = attribute.Key("bandonce.guard.result")
	keyEndpoint      = attribute.Key("bandonce.endpoint")
	keyStatus        = attribute.Key("http.response.status_code")
	keyResend        = attribute.Key("http.request.resend_count")
	keyMode          = attribute.Key("bandonce.control.mode")
	keyInFlight      = attribute.Key("bandonce.control.in_flight")
	keyRoom          = attribute.Key("bandonce.room.id")
	keyMessage       = attribute.Key("bandonce.message.id")
	keyAttempt       = attribute.Key("bandonce.attempt")
	keyFound         = attribute.Key("bandonce.guard.found")
	keyStep          = attribute.Key("bandonce.step.name")
	keyStepKey       = attribute.Key("bandonce.step.idempotency_key")
	keyReplayed      = attribute.Key("bandonce.step.replayed")
)

// hooks returns the instrumentation's hooks, each calling next's after
// its own.
func (in *instruments) hooks(next bandonce.Hooks) bandonce.Hooks {
	h := next
	h.Outcome = func(o bandonce.Outcome) {
		in.messages.Add(context.Background(), 1, metric.WithAttributes(keyOutcome.String(o.Kind.String())))
		if next.Outcome != nil {
			next.Outcome(o)
		}
	}
	h.DeliveryStart = func(ctx context.Context, d bandonce.Delivery) context.Context {
		ctx, _ = in.tracer.Start(ctx, "bandonce.delivery", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(keyRoom.String(d.RoomID), keyMessage.String(d.MessageID)))
		return chainCtx(ctx, d, next.DeliveryStart)
	}
	h.DeliveryEnd = func(ctx context.Context, d bandonce.Delivery) {
		if next.DeliveryEnd != nil {
			next.DeliveryEnd(ctx, d)
		}
		span := trace.SpanFromContext(ctx)
		outcome := "none" // let go, to be served again
		if d.Outcome != 0 {
			outcome = d.Outcome.String()
		}
		span.SetAttributes(keyAttempt.Int(d.Attempt), keyOutcome.String(outcome))
		if d.Outcome == bandonce.Failed || d.Outcome == bandonce.DeadLettered {
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
	h.HandlerStart = func(ctx context.Context, d bandonce.Delivery) context.Context {
		in.handlerActive.Add(ctx, 1)
		ctx, _ = in.tracer.Start(ctx, "bandonce.handler", trace.WithAttributes(
			keyRoom.String(d.RoomID), keyMessage.String(d.MessageID), keyAttempt.Int(d.Attempt)))
		return chainCtx(ctx, d, next.HandlerStart)
	}
	h.HandlerEnd = func(ctx context.Context, d bandonce.Delivery, took time.Duration, err error) {
		if next.HandlerEnd != nil {
			next.HandlerEnd(ctx, d, took, err)
		}
		result := handlerResult(ctx, err)
		in.handlerActive.Add(ctx, -1)
		in.handlerDuration.Record(ctx, took.Seconds(), metric.WithAttributes(keyHandlerResult.String(result)))
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(keyHandlerResult.String(result))
		if err != nil && result == "error" {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	h.GuardRead = func(ctx context.Context, d bandonce.Delivery, found bool, err error) {
		result := "absent"
		switch {
		case err != nil:
			result = "error"
		case found:
			result = "found"
		}
		in.guardReads.Add(ctx, 1, metric.WithAttributes(keyGuardResult.String(result)))
		trace.SpanFromContext(ctx).AddEvent("bandonce.guard.read", trace.WithAttributes(keyGuardResult.String(result), keyFound.Bool(found)))
		if next.GuardRead != nil {
			next.GuardRead(ctx, d, found, err)
		}
	}
	h.Step = func(ctx context.Context, s bandonce.StepRun) {
		in.step(ctx, s)
		if next.Step != nil {
			next.Step(ctx, s)
		}
	}
	h.Request = func(ctx context.Context, r bandonce.Request) {
		in.request(ctx, r)
		if next.Request != nil {
			next.Request(ctx, r)
		}
	}
	h.Control = func(c bandonce.ControlSignal) {
		in.signals.Add(context.Background(), 1, metric.WithAttributes(keyMode.String(c.Mode), keyInFlight.Bool(c.InFlight)))
		if next.Control != nil {
			next.Control(c)
		}
	}
	h.Socket = func(up bool, err error) {
		ctx := context.Background()
		if up {
			in.socketConnected.Record(ctx, 1)
		} else {
			in.socketConnected.Record(ctx, 0)
			in.socketDisconnect.Add(ctx, 1)
		}
		if next.Socket != nil {
			next.Socket(up, err)
		}
	}
	h.Throttle = func(throttled bool, rate float64) {
		ctx := context.Background()
		on := int64(0)
		if throttled {
			on = 1
		}
		in.paced.Record(ctx, on)
		in.pace.Record(ctx, rate)
		if next.Throttle != nil {
			next.Throttle(throttled, rate)
		}
	}
	h.Room = func(id string, added bool) {
		delta := int64(1)
		if !added {
			delta = -1
		}
		in.rooms.Add(context.Background(), delta)
		if next.Room != nil {
			next.Room(id, added)
		}
	}
	return h
}

// request records one HTTP attempt; inside a delivery it is also a span,
// placed after the fact where the attempt ran.
func (in *instruments) request(ctx context.Context, r bandonce.Request) {
	endpoint := metric.WithAttributes(keyEndpoint.String(r.Endpoint))
	in.requests.Add(ctx, 1, metric.WithAttributes(keyEndpoint.String(r.Endpoint), keyStatus.Int(r.Status)))
	in.requestDuration.Record(ctx, r.Took.Seconds(), endpoint)
	if r.Attempt > 1 {
		in.retries.Add(ctx, 1, endpoint)
	}
	if r.Status == 429 {
		in.throttled.Add(ctx, 1, endpoint)
	}
	if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return // a poll or a start-up call: metrics only
	}
	end := time.Now()
	_, span := in.tracer.Start(ctx, r.Endpoint, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(end.Add(-r.Took)),
		trace.WithAttributes(keyEndpoint.String(r.Endpoint), keyResend.Int(r.Attempt-1)))
	if r.Status != 0 {
		span.SetAttributes(keyStatus.Int(r.Status))
	}
	switch {
	case r.Err != nil:
		span.RecordError(r.Err)
		span.SetStatus(codes.Error, r.Err.Error())
	case r.Status >= 400:
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(end))
}

// step is a span for one Message.Step, placed after the fact where it
// ran, a child of the handler's span.
func (in *instruments) step(ctx context.Context, s bandonce.StepRun) {
	end := time.Now()
	_, span := in.tracer.Start(ctx, "bandonce.step", trace.WithTimestamp(end.Add(-s.Took)), trace.WithAttributes(
		keyRoom.String(s.RoomID), keyMessage.String(s.MessageID), keyStep.String(s.Name),
		keyStepKey.String(s.IdempotencyKey), keyReplayed.Bool(s.Replayed)))
	if s.Err != nil {
		span.RecordError(s.Err)
		span.SetStatus(codes.Error, s.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// handlerResult names how a handler call ended: ok, error, or what
// cancelled it.
func handlerResult(ctx context.Context, err error) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, bandonce.ErrInterrupted):
		return "interrupted"
	case errors.Is(cause, bandonce.ErrStopped):
		return "stopped"
	case errors.Is(cause, bandonce.ErrShutdown):
		return "shutdown"
	case errors.Is(cause, bandonce.ErrSuperseded):
		return "superseded"
	case err != nil:
		return "error"
	}
	return "ok"
}

// chainCtx passes ctx on to the hook the caller had set, if any.
func chainCtx(ctx context.Context, d bandonce.Delivery, next func(context.Context, bandonce.Delivery) context.Context) context.Context {
	if next == nil {
		return ctx
	}
	if derived := next(ctx, d); derived != nil {
		return derived
	}
	return ctx
}
