package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// A run as a person reads it: who and what at start, an Info line per
// delivery's outcome, a last line at shutdown, and nothing alarming for a
// clean one (it used to say "socket disconnected; polling until it is
// back" every time).
func TestLogsOfACleanRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		id := w.say(w.rooms[0], "hello")
		logs := &logs{}
		cfg := w.config(echo)
		cfg.DisableSocket = false
		cfg.Logger = logs.logger()
		done := make(chan bandonce.Outcome, 1)
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { done <- o }
		stop := w.start(cfg)
		<-done
		require.NoError(t, stop())

		assert.True(t, logs.has(slog.LevelInfo, "bandonce: serving", "agent="+w.agent.ID, "handle="+w.agent.Handle,
			"rooms=2", "socket=connected", "url="+w.band.BaseURL()), "%v", logs.records)
		assert.True(t, logs.has(slog.LevelInfo, "bandonce: outcome", "message="+id, "outcome=replied", "attempt=1"))
		assert.True(t, logs.has(slog.LevelInfo, "bandonce: stopped", "agent="+w.agent.ID, "replied=1"))
		for _, r := range logs.records {
			assert.Less(t, r.level, slog.LevelWarn, "a clean run logs nothing alarming: %s", r.text)
			assert.NotContains(t, r.text, "socket disconnected")
		}
	})
}

// Config.OutcomeLogLevel quiets the line per delivery's outcome: at Debug,
// a handler at Info drops it, and keeps every other line.
func TestTheOutcomeLineCanBeQuieted(t *testing.T) {
	w := newWorld(t, 1)
	w.say(w.rooms[0], "hello")
	var out safebuf.Buffer
	cfg := w.config(echo)
	cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.OutcomeLogLevel = slog.LevelDebug
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	res, err := s.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Outcomes[bandonce.Replied])
	assert.NotContains(t, out.String(), "bandonce: outcome")
	assert.Contains(t, out.String(), "bandonce: every room drained", "the other Info lines stay")

	// The check can fail: at its default level the line is there.
	out = safebuf.Buffer{}
	w.say(w.rooms[0], "again")
	cfg.OutcomeLogLevel = 0
	s, err = bandonce.New(cfg)
	require.NoError(t, err)
	_, err = s.Drain(context.Background())
	require.NoError(t, err)
	assert.Contains(t, out.String(), "level=INFO msg=\"bandonce: outcome\"")
}

// A repeated failure is a warning that says what failed and where.
func TestRepeatedFailuresNameTheEndpointAndURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hello")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Count: 10, Kind: fakeband.FailBefore, Status: 502})
		logs := &logs{}
		cfg := w.config(echo)
		cfg.Logger = logs.logger()
		done := make(chan bandonce.Outcome, 1)
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { done <- o }
		stop := w.start(cfg)
		<-done
		require.NoError(t, stop())
		assert.True(t, logs.has(slog.LevelWarn, "request failed; backing off", "GET /agent/chats/{id}/messages/next",
			"url="+w.band.BaseURL(), "failures=2"), "%v", logs.records)
	})
}

// A nil Logger is slog.Default(), still behind the key's scrubber.
func TestNilLoggerIsTheDefaultAndScrubbed(t *testing.T) {
	prev := slog.Default()
	defer slog.SetDefault(prev)
	logs := &logs{}
	slog.SetDefault(logs.logger())

	w := newWorld(t, 1)
	w.say(w.rooms[0], "hello")
	cfg := w.config(func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
		return nil, bandonce.Permanent(fmt.Errorf("the key %s did not work", w.agent.Key))
	})
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	_, err = s.Drain(context.Background())
	require.NoError(t, err)
	assert.True(t, logs.has(slog.LevelInfo, "bandonce: serving", w.agent.ID))
	assert.True(t, logs.has(slog.LevelError, "giving up on a message", "did not work"))
	for _, r := range logs.records {
		assert.NotContains(t, r.text, w.agent.Key)
	}
}

// calls records the hooks' calls in order.
type calls struct {
	mu   sync.Mutex
	list []string
}

func (c *calls) add(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, fmt.Sprintf(format, args...))
}

func (c *calls) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

type traceKey struct{}

// hooked is a Config whose every hook reports to c, and whose delivery and
// handler hooks put a value in the context, as a tracer puts its span.
func hooked(cfg bandonce.Config, c *calls) bandonce.Config {
	traced := func(ctx context.Context) string { v, _ := ctx.Value(traceKey{}).(string); return v }
	cfg.Hooks = bandonce.Hooks{
		Outcome: func(o bandonce.Outcome) { c.add("outcome %s", o.Kind) },
		DeliveryStart: func(ctx context.Context, d bandonce.Delivery) context.Context {
			c.add("delivery start attempt=%d", d.Attempt)
			return context.WithValue(ctx, traceKey{}, "delivery")
		},
		DeliveryEnd: func(ctx context.Context, d bandonce.Delivery) {
			c.add("delivery end %s attempt=%d trace=%s", d.Outcome, d.Attempt, traced(ctx))
		},
		HandlerStart: func(ctx context.Context, d bandonce.Delivery) context.Context {
			c.add("handler start attempt=%d trace=%s", d.Attempt, traced(ctx))
			return context.WithValue(ctx, traceKey{}, "handler")
		},
		HandlerEnd: func(ctx context.Context, d bandonce.Delivery, took time.Duration, err error) {
			c.add("handler end trace=%s took=%s err=%v cause=%v", traced(ctx), took, err, context.Cause(ctx))
		},
		GuardRead: func(ctx context.Context, d bandonce.Delivery, found bool, err error) {
			c.add("guard read found=%t err=%v trace=%s", found, err, traced(ctx))
		},
		Request: func(ctx context.Context, r bandonce.Request) {
			if r.Endpoint == "GET /agent/chats/{id}/messages/next" && r.Status == http.StatusNoContent {
				return // the idle polls: how many depends on the scheduler
			}
			c.add("request %s #%d %d trace=%s", r.Endpoint, r.Attempt, r.Status, traced(ctx))
		},
		Control: func(s bandonce.ControlSignal) { c.add("control %s in_flight=%t", s.Mode, s.InFlight) },
		Socket:  func(up bool, err error) { c.add("socket up=%t", up) },
		Room:    func(id string, added bool) { c.add("room added=%t", added) },
	}
	return cfg
}

// One message's delivery, as the hooks see it: in order, each request in
// the delivery's context, the handler in the handler's.
func TestHooksFollowADelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Kind: fakeband.FailBefore, Status: 429})
		c := &calls{}
		cfg := hooked(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			time.Sleep(3 * time.Second) // the work
			if v, _ := ctx.Value(traceKey{}).(string); v != "handler" {
				return nil, errors.New("the handler does not run in HandlerStart's context")
			}
			return echo(ctx, m)
		}), c)
		cfg.DisableSocket = false
		stop := w.start(cfg)
		synctest.Wait()
		w.say(w.rooms[0], "hello")
		time.Sleep(time.Minute)
		synctest.Wait()
		require.NoError(t, stop())

		assert.Equal(t, []string{
			"request GET /agent/me #1 200 trace=",
			"socket up=true",
			"request GET /agent/chats #1 200 trace=",
			"request GET /agent/chats/{id}/messages/next #1 200 trace=",
			"delivery start attempt=0",
			"request POST /agent/chats/{id}/messages/{message_id}/processing #1 200 trace=delivery",
			"handler start attempt=1 trace=delivery",
			"handler end trace=handler took=3s err=<nil> cause=<nil>",
			"request POST /agent/chats/{id}/messages #1 201 trace=delivery",
			"request POST /agent/chats/{id}/messages/{message_id}/processed #1 429 trace=delivery",
			"request POST /agent/chats/{id}/messages/{message_id}/processed #2 200 trace=delivery",
			"outcome replied",
			"delivery end replied attempt=1 trace=delivery",
			"room added=false",
		}, without(without(dropChatsRelists(c.all()), "socket up=false"), "room added=true"))
		assert.Contains(t, c.all(), "socket up=false", "the socket closed at shutdown")
		assert.Contains(t, c.all(), "room added=true", "before or after its first round, as the workers run")
	})
}

// without returns list without the entries equal to x: they come in an
// order the scheduler chooses.
func without(list []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == x })
}

// dropChatsRelists removes the room listings after the first, whose count
// depends on how the socket's connect and the start interleave.
func dropChatsRelists(list []string) []string {
	var out []string
	seen := false
	for _, s := range list {
		if strings.HasPrefix(s, "request GET /agent/chats #") {
			if seen {
				continue
			}
			seen = true
		}
		out = append(out, s)
	}
	return out
}

// The guard's read, an interrupt, and a delivery that ends without an
// outcome reach their hooks too.
func TestHooksSeeTheGuardSignalsAndLeftDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		c := &calls{}
		started := make(chan struct{}, 2)
		cfg := hooked(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			started <- struct{}{}
			if strings.Contains(m.Body(), "slow") {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}
			return echo(ctx, m)
		}), c)
		cfg.DisableSocket = false
		cfg.ShutdownTimeout = time.Second
		stop := w.start(cfg)
		synctest.Wait()

		// A lost answer to the reply's POST: once the send has settled,
		// the next delivery reads the room and finds the reply there.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
		w.say(w.rooms[0], "hello")
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Contains(t, c.all(), "guard read found=true err=<nil> trace=delivery")
		assert.Contains(t, c.all(), "delivery end unknown attempt=1 trace=delivery")
		assert.Contains(t, c.all(), "delivery end duplicate-dropped attempt=2 trace=delivery")

		// An interrupt cuts a running handler.
		w.say(w.rooms[0], "slow one")
		<-started
		<-started
		synctest.Wait()
		require.NoError(t, w.band.Interrupt(w.agent.ID, w.rooms[0].ID))
		synctest.Wait()
		assert.Contains(t, c.all(), "control interrupt in_flight=true")
		assert.Contains(t, c.all(), "handler end trace=handler took=0s err=bandonce: interrupted cause=bandonce: interrupted")
		assert.Contains(t, c.all(), "delivery end interrupted attempt=1 trace=delivery")

		// Shutdown while a handler runs: the delivery ends without an
		// outcome; Band serves the message again after a restart.
		w.say(w.rooms[0], "slow two")
		<-started
		synctest.Wait()
		require.NoError(t, stop())
		list := without(c.all(), "socket up=false")
		assert.Equal(t, []string{
			"handler end trace=handler took=1s err=bandonce: shutting down cause=bandonce: shutting down",
			"delivery end unknown attempt=1 trace=delivery",
			"room added=false",
		}, list[len(list)-3:], "after ShutdownTimeout the handler is cancelled; no outcome, nothing marked")
		assert.Contains(t, c.all(), "socket up=false")
	})
}
