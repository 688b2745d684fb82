package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

func TestNewRejectsBadConfig(t *testing.T) {
	ok := bandonce.Config{APIKey: "k", Handler: echo}
	cases := map[string]func(*bandonce.Config){
		"APIKey":          func(c *bandonce.Config) { c.APIKey = " " },
		"Handler":         func(c *bandonce.Config) { c.Handler = nil },
		"BaseURL":         func(c *bandonce.Config) { c.BaseURL = "ftp://x" },
		"SocketURL":       func(c *bandonce.Config) { c.SocketURL = "https://app.band.ai/api/v1/socket/websocket" },
		"MaxAttempts":     func(c *bandonce.Config) { c.MaxAttempts = -1 },
		"Rooms":           func(c *bandonce.Config) { c.Rooms = []string{"a", "a"} },
		"ShutdownTimeout": func(c *bandonce.Config) { c.ShutdownTimeout = -time.Second },
		"Retry.BaseDelay": func(c *bandonce.Config) {
			c.Retry = bandonce.RetryPolicy{BaseDelay: time.Minute, MaxDelay: time.Second}
		},
	}
	for field, spoil := range cases {
		cfg := ok
		spoil(&cfg)
		_, err := bandonce.New(cfg)
		var ce *bandonce.ConfigError
		require.ErrorAs(t, err, &ce, field)
		assert.Equal(t, field, ce.Field)
	}
	_, err := bandonce.New(ok)
	assert.NoError(t, err)
}

func TestRejectedKeyFailsFastWithoutRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		cfg := w.config(echo)
		cfg.APIKey = "not-a-key"
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		err = s.Run(context.Background())
		require.ErrorIs(t, err, bandonce.ErrUnauthorized)
		var apiErr *bandonce.APIError
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusUnauthorized, apiErr.Status)
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointMe], "a 401 is never retried")
	})
}

func TestTransientFaultsOnReadsAndMarksAreRiddenOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		for _, f := range []fakeband.Fault{
			{Endpoint: fakeband.EndpointMe, Nth: 1, Count: 12, Kind: fakeband.FailBefore, Status: 503},
			{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.FailBefore, Status: 429, EmptyBody: true},
			{Endpoint: fakeband.EndpointNext, Nth: 2, Kind: fakeband.FailBefore, Status: 429, RetryAfter: "3600"},
			{Endpoint: fakeband.EndpointProcessing, Nth: 1, Count: 3, Kind: fakeband.FailBefore, Status: 503},
			{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 2, Kind: fakeband.FailBefore, Status: 502},
		} {
			w.band.Inject(f)
		}
		start := time.Now()
		var doneAt time.Duration
		cfg := w.config(echo)
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { doneAt = time.Since(start) }
		stop := w.start(cfg)
		runFor(5 * time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
		fired := w.band.FaultsFired()
		assert.Equal(t, 12, fired["me/fail_before"], "a start-up outage longer than one call's retries")
		assert.Equal(t, 3, fired["processing/fail_before"])
		// Virtual time: the 3600 s Retry-After was capped at MaxDelay (5 s),
		// so the whole ordeal took well under a minute of (virtual) time.
		assert.Less(t, doneAt, time.Minute)
	})
}

func TestNonTransientStatusesAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 403, 404, 422} {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, 1)
			w.say(w.rooms[0], "hi")
			w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.FailBefore, Status: status})
			cfg := w.config(echo)
			cfg.PollInterval = time.Hour
			stop := w.start(cfg)
			time.Sleep(time.Millisecond) // the first round only: its backoff is longer
			synctest.Wait()
			require.NoError(t, stop())
			assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointNext], "status %d", status)
		})
	}
}

// corrupting rewrites the body of chosen answers, as a broken proxy or a
// buggy server would.
type corrupting struct {
	next    http.RoundTripper
	mu      sync.Mutex
	bodies  []string // replacement bodies for successive 200s of /next
	applied int
}

func (c *corrupting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/messages/next") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied >= len(c.bodies) {
		return resp, nil
	}
	resp.Body.Close()
	body := c.bodies[c.applied]
	c.applied++
	resp.Body = io.NopCloser(strings.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

func TestMalformedServerAnswersAreLoggedAndNothingIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		bad := &corrupting{next: w.band.HTTPClient().Transport, bodies: []string{
			`{"data": {"id": 12, "content": true}}`,         // wrong types
			`{"data": {"content": "no id"}}`,                // missing fields
			`{"data": [`,                                    // malformed JSON
			`<html>gateway</html>`,                          // not JSON at all
			`{"nodata": {}}`,                                // no envelope
			`{"data":"` + strings.Repeat("x", 5<<20) + `"}`, // oversized
		}}
		logs := &safebuf.Buffer{}
		cfg := w.config(echo)
		cfg.HTTPClient = &http.Client{Transport: bad}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		stop := w.start(cfg)
		runFor(2 * time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 6, bad.applied)
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "the message survived six broken answers")
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
		assert.GreaterOrEqual(t, strings.Count(logs.String(), "request failed"), 6, logs.String())
	})
}

func TestRoomTheAgentIsNotInIsLeftAndOthersServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		logs := &safebuf.Buffer{}
		cfg := w.config(echo)
		cfg.Rooms = []string{"00000000-0000-0000-0000-00000000dead", w.rooms[0].ID}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		stop := w.start(cfg)
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Contains(t, logs.String(), "not in this room")
	})
}

func TestPanickingHandlerIsAFailureWithItsStackLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		var calls atomic.Int32
		logs := &safebuf.Buffer{}
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if calls.Add(1) == 1 {
				panic("kaboom")
			}
			return echo(ctx, m)
		})
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		var outcomes []bandonce.Outcome
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { outcomes = append(outcomes, o) }
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		require.Len(t, outcomes, 2)
		assert.Equal(t, bandonce.Failed, outcomes[0].Kind)
		var pe *bandonce.PanicError
		require.ErrorAs(t, outcomes[0].Err, &pe)
		assert.Equal(t, "kaboom", pe.Value)
		assert.Equal(t, bandonce.Replied, outcomes[1].Kind)
		assert.Contains(t, logs.String(), "handler panicked")
		assert.Contains(t, logs.String(), "failure_test.go", "the stack is logged")
		assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
	})
}

func TestHandlerTimeoutCountsAsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		cfg.HandlerTimeout = 3 * time.Second
		cfg.MaxAttempts = 2
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		marks := w.band.Marks(w.agent.ID, id)
		require.NotEmpty(t, marks)
		assert.Contains(t, marks[1].Error, "handler timed out after 3s")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "dead-lettered after two timeouts")
	})
}

func TestRunTwiceAtOnceIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		s, err := bandonce.New(w.config(echo))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		assert.True(t, errors.Is(s.Run(ctx), bandonce.ErrAlreadyRunning))
		cancel()
		assert.NoError(t, <-done)
	})
}

func TestMaxConcurrentRoomsCapsHandlersInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 4)
		for _, r := range w.rooms {
			w.say(r, "a")
			w.say(r, "b")
		}
		var inFlight, peak atomic.Int32
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(time.Second)
			return echo(ctx, m)
		})
		cfg.MaxConcurrentRooms = 2
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		assert.EqualValues(t, 2, peak.Load(), "rooms run in parallel, up to the cap")
		for _, r := range w.rooms {
			assert.Len(t, w.replies(r), 2)
		}
	})
}

func TestByDefaultThousandsOfRoomsWaitOnASlowHandlerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rooms = 2000
		w := newWorld(t, rooms)
		for _, r := range w.rooms {
			w.say(r, "a")
		}
		var inFlight, peak atomic.Int32
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			select { // a model call of a minute, honouring ctx
			case <-time.After(time.Minute):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			return echo(ctx, m)
		})
		stop := w.start(cfg)
		runFor(10 * time.Minute)
		require.NoError(t, stop())
		assert.EqualValues(t, rooms, peak.Load(), "every room's turn waits on its handler at once")
		for _, r := range w.rooms {
			assert.Len(t, w.replies(r), 1)
		}
	})
}

func TestRequestTimeoutBoundsEachRequestButNotTheSocket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		id := w.say(w.rooms[0], "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
		cfg := w.config(echo)
		cfg.DisableSocket = false
		cfg.RequestTimeout = 2 * time.Second
		start := time.Now()
		var doneAt time.Duration
		cfg.Hooks.Outcome = func(bandonce.Outcome) { doneAt = time.Since(start) }
		stop := w.start(cfg)
		runFor(5 * time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Less(t, doneAt, 10*time.Second, "the hung /next gave up after RequestTimeout and was retried")
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointSocket], "the socket outlives RequestTimeout")
	})
}

// quotaOnce answers the first reply POST with Band's plan-limit 403.
type quotaOnce struct {
	next http.RoundTripper
	mu   sync.Mutex
	done bool
}

func (q *quotaOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	q.mu.Lock()
	first := !q.done && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/messages")
	q.done = q.done || first
	q.mu.Unlock()
	if !first {
		return q.next.RoundTrip(req)
	}
	body := `{"error":{"code":"limit_reached","message":"plan limit reached","request_id":"r1"}}`
	return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// A 403 is a stop only when it is not the plan's quota: limit_reached keeps
// the reply and retries it, and the room is not stopped.
func TestAQuotaRefusalIsRetriedNotAStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		first := w.say(w.rooms[0], "one")
		cfg := w.config(echo)
		cfg.HTTPClient = &http.Client{Transport: &quotaOnce{next: w.band.HTTPClient().Transport}}
		var kinds []bandonce.OutcomeKind
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { kinds = append(kinds, o.Kind) }
		stop := w.start(cfg)
		runFor(time.Minute)
		second := w.say(w.rooms[0], "two")
		runFor(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied, bandonce.Replied}, kinds)
		for _, id := range []string{first, second} {
			assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
		}
	})
}

// A reply of only invisible characters (white space, a zero-width space,
// a joiner) would show the room nothing but the dedup marker: it is
// refused for good, never posted, and the message dead-lettered.
func TestAReplyOfInvisibleCharactersIsNotPosted(t *testing.T) {
	for _, content := range []string{"  \n", "\u200b", "\u200d \ufeff"} {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, 1)
			id := w.say(w.rooms[0], "say nothing")
			var dead []bandonce.Outcome
			cfg := w.config(func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
				return &bandonce.Reply{Content: content, Mentions: []string{w.human.ID}}, nil
			})
			cfg.Hooks.DeadLetter = func(o bandonce.Outcome) { dead = append(dead, o) }
			stop := w.start(cfg)
			runFor(time.Minute)
			require.NoError(t, stop())
			assert.Empty(t, w.replies(w.rooms[0]), "%q", content)
			require.Len(t, dead, 1, "%q", content)
			assert.ErrorContains(t, dead[0].Err, "blank")
			assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		})
	}
}

// cancelledOnce fails its first AckPending as a call cut off by a
// stopping shell would.
type cancelledOnce struct {
	*bandonce.MemoryLedger
	done atomic.Bool
}

func (l *cancelledOnce) AckPending(ctx context.Context, room, id string) (bool, error) {
	if l.done.CompareAndSwap(false, true) {
		return false, fmt.Errorf("ledger read: %w", context.Canceled)
	}
	return l.MemoryLedger.AckPending(ctx, room, id)
}

// A ledger call cut off because the shell is stopping says nothing about
// the ledger: it is logged at Debug, not as an error on stderr; the
// message is still answered once.
func TestALedgerCallCutOffIsNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		id := r.say(r.rooms[0], "hello")
		stop := r.run(func(c *bandonce.Config) { c.Ledger = &cancelledOnce{MemoryLedger: bandonce.NewMemoryLedger()} })
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.True(t, r.logs.has(slog.LevelDebug, "ledger read failed"))
		assert.False(t, r.logs.has(slog.LevelError, "ledger read failed"))
		assert.Equal(t, 1, r.repliesTo(r.rooms[0], bandonce.DefaultKey(id)))
	})
}

// A reply too large to be read back from /context under
// Config.MaxResponseBytes is never posted: posted, it would leave every
// later guard of the room unable to tell what it holds. It is
// dead-lettered, the reason naming its size, and the room goes on.
func TestAReplyTooLargeToReadBackIsDeadLetteredNamingItsSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		big := w.say(room, "big")
		small := w.say(room, "small")
		var outcomes []bandonce.Outcome
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			size := 10
			if m.Body() == "big" {
				size = 100_000
			}
			return &bandonce.Reply{Content: strings.Repeat("x", size), Mentions: []string{m.SenderID}}, nil
		})
		cfg.MaxResponseBytes = 64 << 10
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { outcomes = append(outcomes, o) }
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		assert.Zero(t, w.repliesTo(room, bandonce.DefaultKey(big)))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(small)))
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, big))
		marks := w.band.Marks(w.agent.ID, big)
		var reasons []string
		for _, m := range marks {
			if m.Kind == "failed" {
				reasons = append(reasons, m.Error)
			}
		}
		require.Len(t, reasons, 1)
		assert.Contains(t, reasons[0], "reply of 100000 bytes")
		assert.Contains(t, reasons[0], "MaxResponseBytes (65536)")
		require.NotEmpty(t, outcomes)
		assert.Equal(t, bandonce.DeadLettered, outcomes[0].Kind)
	})
}

// An own post in the room too large to read back (posted before the cap
// was lowered, or by another build) leaves the guard unable to tell
// whether it carries the reply's key: the message is given up,
// dead-lettered with the size named, never posted unguarded and never
// retried for ever.
func TestAGuardThatCannotReadAnOwnPostBackGivesTheMessageUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		_, err := w.band.Say(room.ID, w.agent.ID, strings.Repeat("z", 100_000), w.human.ID)
		require.NoError(t, err)
		id := w.say(room, "order-1")
		cfg := w.config(keyedByBody) // a natural key: the guard reads the room
		cfg.MaxResponseBytes = 64 << 10
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		assert.Zero(t, w.repliesTo(room, "order-1"), "never posted unguarded")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "given up, not retried for ever")
		var reasons []string
		for _, m := range w.band.Marks(w.agent.ID, id) {
			if m.Kind == "failed" {
				reasons = append(reasons, m.Error)
			}
		}
		require.Len(t, reasons, 1)
		assert.Contains(t, reasons[0], "cannot be read back")
		assert.Regexp(t, `answer of \d+ bytes exceeds the 65536-byte cap`, reasons[0])
	})
}

// A message however far past Config.MaxResponseBytes is dead-lettered
// with its size named, and the room goes on: its ids are read from the
// answer's skeleton, whatever its size, never kept whole.
func TestAMessageFarPastTheCapIsDeadLetteredAndTheRoomGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		huge := w.say(room, strings.Repeat("y", 1_000_000)) // 15 times the cap
		small := w.say(room, "small")
		cfg := w.config(echo)
		cfg.MaxResponseBytes = 64 << 10
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		assert.Equal(t, "processed", w.band.Status(w.agent.ID, huge), "dead-lettered, not served for ever")
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(small)), "the room goes on")
		var reasons []string
		for _, m := range w.band.Marks(w.agent.ID, huge) {
			if m.Kind == "failed" {
				reasons = append(reasons, m.Error)
			}
		}
		require.Len(t, reasons, 1)
		assert.Contains(t, reasons[0], "message too large to read")
		assert.Regexp(t, `answer of \d+ bytes exceeds the 65536-byte cap`, reasons[0])
	})
}

// A human's message far past the cap in the room's context, kept from
// before the cap was lowered, does not stop the guard: it is read past by
// its ids, and every later message is answered once.
func TestAHumanMessageFarPastTheCapDoesNotStopTheGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		w.say(room, strings.Repeat("y", 1_000_000))
		stop := w.start(w.config(keyedByBody))
		runFor(time.Minute)
		require.NoError(t, stop())

		w.say(room, "order-1")
		w.say(room, "order-2")
		cfg := w.config(keyedByBody) // a natural key: the guard reads the room
		cfg.MaxResponseBytes = 64 << 10
		stop = w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, "order-1"))
		assert.Equal(t, 1, w.repliesTo(room, "order-2"))
	})
}

// Origin: control-semantics.md §6.3 gap G12.
// A message Band keeps serving though it is done must not spin the room: a
// stale /next, and a processed mark that keeps failing. A busy loop would
// never let virtual time pass; the counts bound the rate.
func TestNoBusyLoopOnAMessageBandKeepsServing(t *testing.T) {
	t.Run("stale next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, 0)
			room := r.rooms[0]
			id := r.say(room, "done once")
			stop := r.run(nil)
			time.Sleep(time.Second)
			require.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Probability: 1, Kind: fakeband.StaleNext})
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID)) // an interrupt between cycles changes nothing
			before := r.tap.count("next", room.ID)
			r.say(room, "wakes the room") // its push sends the room into the stale serves
			time.Sleep(10 * time.Minute)
			require.NoError(t, stop())
			assert.Less(t, r.tap.count("next", room.ID)-before, 400, "at most a few a second: backoff, not a spin")
			assert.Equal(t, 1, r.h.callsOf(id), "never handled again")
			assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
		})
	})
	t.Run("failing ack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, time.Hour)
			room := r.rooms[0]
			id := r.say(room, "interrupted")
			stop := r.run(nil)
			r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Probability: 1, Kind: fakeband.FailBefore, Status: 503})
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(10 * time.Minute)
			require.NoError(t, stop())
			assert.Less(t, r.tap.count("next", room.ID), 400)
			assert.Equal(t, 1, r.h.callsOf(id))
		})
	})
}

// Origin: band-once 0.1's defect 5 (band-once-python.md).
// A failed message stalled the room, since Band re-serves it at the head of
// /next.
func TestHandlerFailingPastMaxAttemptsDoesNotStallTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		poison := w.say(room, "poison")
		after := []string{w.say(room, "next 1"), w.say(room, "next 2")}
		var deadLetters atomic.Int32
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if m.Body() == "poison" {
				return nil, fmt.Errorf("cannot digest %q", m.Body())
			}
			return echo(ctx, m)
		})
		cfg.MaxAttempts = 3
		cfg.Hooks.DeadLetter = func(bandonce.Outcome) { deadLetters.Add(1) }
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		for _, id := range after {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		}
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, poison), "dead-lettered messages are consumed")
		assert.Zero(t, w.repliesTo(room, bandonce.DefaultKey(poison)))
		var failed []string
		for _, mk := range w.band.Marks(w.agent.ID, poison) {
			if mk.Kind == "failed" {
				failed = append(failed, mk.Error)
			}
		}
		require.Len(t, failed, 3, "three failures, the last with the dead-letter reason")
		assert.Contains(t, failed[0], "cannot digest")
		assert.Contains(t, failed[2], "dead-lettered after 3 failure(s)")
		assert.EqualValues(t, 1, deadLetters.Load())
	})
}

// Origin: band-once 0.1's defect 6 (band-once-python.md).
// A failed ack after the post was turned into a failed mark.
func TestProcessedFailingAfterThePostRetriesOnlyTheAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		var calls atomic.Int32
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			calls.Add(1)
			return echo(ctx, m)
		}
		// Enough 503s to exhaust one call's retries twice over.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 12, Kind: fakeband.FailBefore, Status: 503})
		stop := w.start(w.config(h))
		runFor(2 * time.Minute)
		require.NoError(t, stop())
		assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		for _, mk := range w.band.Marks(w.agent.ID, id) {
			assert.NotEqual(t, "failed", mk.Kind, "a message whose reply was posted is never marked failed")
		}
	})
}
