package verify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/band-once/bandonce"
)

// Timing the Shell adapter gives the fields a Config leaves zero: short, so
// a schedule's virtual time stays small. Fields the caller set are kept.
const (
	simRequestTimeout = 2 * time.Second
	simPollInterval   = 250 * time.Millisecond
	simResyncInterval = time.Second
	simMarkTimeout    = 3 * time.Second
	simShutdown       = 100 * time.Millisecond
)

// Shell adapts a bandonce.Handler to a Factory: every life runs a fresh
// bandonce.Shell with h, configured from cfg (at most one; its Handler is
// ignored) and the Env: APIKey, BaseURL, SocketURL and HTTPClient come from
// the Env. Timing fields left zero get short values suited to the
// simulation, and Retry.Seed, if zero, the life's seed, so runs replay.
//
// Leave cfg.Ledger nil, or a *bandonce.MemoryLedger, and every life gets
// a fresh MemoryLedger (with its cap), as after a real crash; with the
// DurableLedger option a nil cfg.Ledger gets the schedule's own ledger
// instead, kept across its lives as a database would be. Any other
// Ledger set in cfg is shared by every life of every schedule (and by the
// re-runs that shrink a violation): a durable one as a database is, one
// that is not durable kept across kills that would lose it, which the
// Result's NotApplicable says. The adapter watches the ledger's step records, to judge
// that no step runs again after its result was recorded.
// Every handler call gets the life's External through its context (see
// ExternalFrom). The adapter records each call, through External.Started
// and for the verifier's judgement of handlers that do not honour their
// context.
func Shell(h bandonce.Handler, cfg ...bandonce.Config) Factory {
	var base bandonce.Config
	if len(cfg) > 0 {
		base = cfg[0]
	}
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			c := base
			c.APIKey, c.BaseURL, c.SocketURL, c.HTTPClient = env.APIKey, env.BaseURL, env.SocketURL, env.HTTPClient
			fillTiming(&c, env.Seed)
			c.Handler = observeHandler(h, env)
			c.Hooks = observeHooks(c.Hooks, env)
			if c.Logger == nil {
				// The schedule's faults are deliberate; the shell's
				// warnings about them would bury the test's own output.
				c.Logger = slog.New(slog.DiscardHandler)
			}
			switch l := c.Ledger.(type) {
			case nil:
				if o := env.External.obs; o != nil && o.durable {
					c.Ledger = o.scheduleLedger()
				} else {
					c.Ledger = bandonce.NewMemoryLedger()
				}
			case *bandonce.MemoryLedger:
				// A process's memory dies with it: every life gets its
				// own, as after a real crash, whatever cfg shares.
				c.Ledger = &bandonce.MemoryLedger{MaxKeysPerRoom: l.MaxKeysPerRoom}
			default:
				if o := env.External.obs; o != nil && !l.Durable() {
					o.mu.Lock()
					o.notes[fmt.Sprintf(sharedLedger, l)] = true
					o.mu.Unlock()
				}
			}
			if o := env.External.obs; o != nil {
				c.Ledger = &stepLedger{Ledger: c.Ledger, o: o, life: env.Life}
			}
			sh, err := bandonce.New(c)
			if err != nil {
				return err
			}
			return sh.Run(ctx)
		}
	}
}

func fillTiming(c *bandonce.Config, seed uint64) {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.RequestTimeout, simRequestTimeout)
	set(&c.PollInterval, simPollInterval)
	set(&c.ResyncInterval, simResyncInterval)
	set(&c.MarkTimeout, simMarkTimeout)
	set(&c.ShutdownTimeout, simShutdown)
	if c.Retry == (bandonce.RetryPolicy{}) {
		c.Retry = bandonce.RetryPolicy{MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxRetryAfter: time.Second}
	}
	if c.Backoff == (bandonce.Backoff{}) {
		c.Backoff = bandonce.Backoff{BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxRetryAfter: time.Second}
	}
	if c.Retry.Seed == 0 {
		c.Retry.Seed = seed | 1
	}
}

// sharedLedger is the note for a Ledger in cfg that is not durable: the
// lives share what a crash loses.
const sharedLedger = "the Config's Ledger (%T) is not durable, yet every life of the agent shares it: a kill here keeps what a real crash loses, so the crash checks judge less than they say (leave Config.Ledger nil, or use a durable Ledger)"

// observeHooks wraps the hooks that concern one message, so an effect
// performed from one (billing on an outcome) belongs to a turn of that
// message and is judged like the handler's: at most once, under a stable
// key, and not lost by a crash between the outcome and the hook.
func observeHooks(h bandonce.Hooks, env Env) bandonce.Hooks {
	o := env.External.obs
	if o == nil {
		return h
	}
	around := func(room, msg string, call func()) {
		t := o.openHookTurn(env.Life, room, msg)
		defer o.closeTurn(t)
		call()
	}
	for _, hook := range []*func(bandonce.Outcome){&h.Outcome, &h.DeadLetter} {
		if next := *hook; next != nil {
			*hook = func(out bandonce.Outcome) { around(out.RoomID, out.MessageID, func() { next(out) }) }
		}
	}
	if next := h.DeliveryEnd; next != nil {
		h.DeliveryEnd = func(ctx context.Context, d bandonce.Delivery) {
			around(d.RoomID, d.MessageID, func() { next(ctx, d) })
		}
	}
	if next := h.HandlerEnd; next != nil {
		h.HandlerEnd = func(ctx context.Context, d bandonce.Delivery, took time.Duration, err error) {
			around(d.RoomID, d.MessageID, func() { next(ctx, d, took, err) })
		}
	}
	return h
}

// observeHandler wraps h so the verifier knows when each call started,
// when its context ended and why, and when it returned.
func observeHandler(h bandonce.Handler, env Env) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		ext := env.External
		if _, err := ext.inner.Started(m.RoomID, m.ID); err != nil {
			return nil, err
		}
		defer func() { _ = ext.inner.Ended(m.RoomID, m.ID) }()
		o := ext.obs
		if o == nil {
			return h(context.WithValue(ctx, externalKey{}, ext), m)
		}
		// The handler gets its own External, bound to this call, so every
		// effect it performs is known to belong to this delivery.
		bound := *ext
		bound.turn = o.openTurn(env.Life, m.RoomID, m.ID, true)
		defer o.closeTurn(bound.turn)
		ctx = context.WithValue(ctx, externalKey{}, &bound)
		call := &handlerCall{life: env.Life, room: m.RoomID, msg: m.ID, start: time.Now(), turn: bound.turn}
		running := lifeMessage{env.Life, m.ID}
		o.mu.Lock()
		o.handlers = append(o.handlers, call)
		o.running[running] = ctx
		o.mu.Unlock()
		stop := context.AfterFunc(ctx, func() {
			o.mu.Lock()
			call.cancelled, call.cause = time.Now(), context.Cause(ctx)
			o.mu.Unlock()
		})
		defer stop()
		reply, err := h(ctx, m)
		o.mu.Lock()
		delete(o.running, running)
		call.returned, call.end = true, time.Now()
		bound.turn.ok = err == nil
		if reply != nil { // the key the handler chose, posted or not
			key := reply.DedupKey
			if key == "" {
				key = bandonce.DefaultKey(m.ID)
			}
			o.noteKeyLocked(m.ID, key, env.Life)
			o.noteReplyLocked(env.Life, m.RoomID, m.ID, key, reply.Content)
		}
		o.mu.Unlock()
		return reply, err
	}
}
