package proof

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/leasemodel"
)

// ReplicaConfig configures ReplicaAgent.
type ReplicaConfig struct {
	// Shell configures each replica's shell.
	Shell ShellConfig
	// LeaseTime is the lease's length; zero means DefaultLeaseTime. Give
	// the engine the same (Options.LeaseTime).
	LeaseTime time.Duration

	// Broken variants, for the prover's self-tests.
	ignoreLease bool // the holder checks its lease nowhere: no fence on sends or writes, no stop when it is lost
	noFencing   bool // ignoreLease, on a model that does not fence writes either
}

// MaxSkewPPM bounds the clock-rate skew between a replica and the
// ledger's database that the prover draws, and that the lease's client
// allows for: 1%, pgledger.MaxClockSkew.
const MaxSkewPPM = 10_000

// ReplicaAgent is the prover's agent for schedules with replicas: every
// replica's life runs the lease protocol of pgledger (RunLeader) against
// one leasemodel database per schedule, the model held to pgledger's SQL
// by internal/leasetest, and while it holds the lease runs the prover's
// Shell on a ledger whose writes are fenced as pgledger's are, through a
// transport that refuses to send once the lease is gone by the replica's
// own clock (pgledger's Ledger.Transport). Each replica's clock runs at
// its Schedule.Skew.
//
// The loop is pgledger's, line for line where it can be: campaign (ask,
// or wait until the lease seen runs out, at most a poll); hold (renew
// every third of the lease, retry every tenth, give up when refused or
// when none succeeded before the lease ran out by the replica's clock);
// release on a clean stop. cmd/proof's -ledger pg runs pgledger itself.
func ReplicaAgent(cfg ReplicaConfig) func(*Schedule) (Factory, func()) {
	cfg.ignoreLease = cfg.ignoreLease || cfg.noFencing
	return func(s *Schedule) (Factory, func()) {
		db := leasemodel.New(time.Now)
		db.NoFencing = cfg.noFencing
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				skew := 0
				if env.Replica < len(s.Skew) {
					skew = s.Skew[env.Replica]
				}
				c := &leaseClient{db: db, env: env, cfg: cfg, lease: cmp.Or(cfg.LeaseTime, DefaultLeaseTime),
					holder: fmt.Sprintf("replica-%d/life-%d", env.Replica, env.Life), clock: newSkewedClock(skew)}
				c.poll = c.lease / 20 // pgledger's default PollInterval
				return c.run(ctx)
			}
		}, nil
	}
}

// replicaAgentID names the agent's lease and records in the model.
const replicaAgentID = "agent"

// skewedClock is a replica's clock: it runs ppm parts per million fast
// (slow when negative) against the bubble's, the database's.
type skewedClock struct {
	origin time.Time
	ppm    int
}

func newSkewedClock(ppm int) skewedClock { return skewedClock{origin: time.Now(), ppm: ppm} }

func (c skewedClock) now() time.Time {
	return c.origin.Add(time.Duration(math.Ceil(float64(time.Since(c.origin)) * c.rate())))
}

func (c skewedClock) rate() float64 { return 1 + float64(c.ppm)/1e6 }

// real is how long d of this clock lasts by the database's, rounded up,
// so that a timer set for d never fires before d has passed by this
// clock (one that fired a nanosecond early would spin).
func (c skewedClock) real(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d) / c.rate()))
}

func (c skewedClock) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(c.real(d))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leaseClient is one life's side of the lease: pgledger's Store.
type leaseClient struct {
	db          *leasemodel.DB
	env         Env
	cfg         ReplicaConfig
	lease, poll time.Duration
	holder      string
	clock       skewedClock
}

// errReplicaLeaseLost is the cause a replica's shell is cancelled with
// when its lease goes (pgledger.ErrLeaseLost).
var errReplicaLeaseLost = errors.New("proof: lease lost")

// errReplicaFenced is what a write or request refused by the lease gets
// (pgledger.ErrFenced).
var errReplicaFenced = errors.New("proof: refused: the lease is no longer held")

// run is RunLeader: campaign, hold, and again, until ctx ends.
func (c *leaseClient) run(ctx context.Context) error {
	for {
		ls, err := c.campaign(ctx)
		if err != nil {
			return nil // ctx ended
		}
		lost, err := c.hold(ctx, ls)
		switch {
		case ctx.Err() != nil:
			return nil
		case !lost:
			return err // the shell returned on its own (superseded): so does RunLeader
		}
	}
}

// call is one statement: through the engine, bounded as pgledger bounds
// it (half a lease, at least a second).
func (c *leaseClient) call(ctx context.Context, op string, f func()) error {
	ctx, cancel := context.WithTimeout(ctx, max(c.lease/2, time.Second))
	defer cancel()
	return c.env.LedgerCall(ctx, op, f)
}

// heldFor is pgledger's Store.heldFor: the lease less what a clock
// running MaxSkewPPM slow would add to it.
func (c *leaseClient) heldFor() time.Duration {
	return c.lease - time.Duration(float64(c.lease)*MaxSkewPPM/1e6)
}

// replicaLease is one acquisition, as this life sees it (pgledger's
// lease), by its own clock.
type replicaLease struct {
	epoch int64
	clock skewedClock

	mu       sync.Mutex
	deadline time.Time
	lost     string
}

func (l *replicaLease) short(margin time.Duration) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != "" {
		return "the lease is no longer held: " + l.lost
	}
	switch left := l.deadline.Sub(l.clock.now()); {
	case left <= 0:
		return "the lease ran out by this replica's clock"
	case left <= margin:
		return fmt.Sprintf("only %s of the lease is left", left)
	}
	return ""
}

func (l *replicaLease) extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = deadline
}

func (l *replicaLease) end(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == "" {
		l.lost = reason
	}
}

func (l *replicaLease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline.Sub(l.clock.now())
}

// campaign waits until this life holds the lease or ctx ends.
func (c *leaseClient) campaign(ctx context.Context) (*replicaLease, error) {
	for {
		sent := c.clock.now()
		var epoch int64
		err := c.call(ctx, "acquire", func() { epoch = c.db.Acquire(replicaAgentID, c.holder, c.lease) })
		if err == nil && epoch > 0 {
			return &replicaLease{epoch: epoch, clock: c.clock, deadline: sent.Add(c.heldFor())}, nil
		}
		wait := c.poll
		if err == nil {
			var left time.Duration
			var ok bool
			err = c.call(ctx, "lookup", func() { _, _, left, ok = c.db.Lookup(replicaAgentID) })
			if err == nil && ok {
				wait = max(min(wait, left), time.Millisecond)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := c.clock.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// hold runs the shell under ls, renewing it, until the shell returns;
// lost reports whether the lease was lost meanwhile.
func (c *leaseClient) hold(ctx context.Context, ls *replicaLease) (lost bool, err error) {
	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		c.keep(leadCtx, ls, cancel)
	}()
	c.env.Leading(ls.epoch)
	env := c.env
	var rt http.RoundTripper = env.HTTPClient.Transport
	if !c.cfg.ignoreLease {
		rt = &leaseTransport{ls: ls, base: rt}
	}
	env.HTTPClient = &http.Client{Transport: env.Awake(rt)}
	err = RunShell(leadCtx, env, &replicaLedger{c: c, ls: ls}, c.cfg.Shell)
	lost = errors.Is(context.Cause(leadCtx), errReplicaLeaseLost) || ls.short(0) != ""
	c.env.Leading(0)
	cancel(errors.New("the leader returned"))
	<-kept
	ls.end("the leader returned")
	if !lost {
		_ = c.call(context.WithoutCancel(ctx), "release", func() { c.db.Release(replicaAgentID, ls.epoch) })
	}
	return lost, err
}

// keep renews ls every third of the lease until ctx ends, and cancels
// the shell when the lease is lost, as pgledger's keep does.
func (c *leaseClient) keep(ctx context.Context, ls *replicaLease, cancel context.CancelCauseFunc) {
	every, retry := c.lease/3, c.lease/10
	timer := time.NewTimer(c.clock.real(every))
	defer timer.Stop()
	lose := func(reason string) {
		ls.end(reason)
		if !c.cfg.ignoreLease {
			cancel(fmt.Errorf("%w: %s", errReplicaLeaseLost, reason))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if reason := ls.short(0); reason != "" {
			lose(reason)
			return
		}
		sent := c.clock.now()
		var renewed bool
		rctx, rcancel := context.WithTimeout(ctx, min(max(c.lease/2, time.Second), c.clock.real(max(ls.left(), 0))))
		err := c.env.LedgerCall(rctx, fmt.Sprint("renew ", ls.epoch), func() { renewed = c.db.Renew(replicaAgentID, ls.epoch, c.lease) })
		rcancel()
		switch {
		case err == nil && renewed:
			ls.extend(sent.Add(c.heldFor()))
			if reason := ls.short(0); reason != "" {
				lose(reason)
				return
			}
			timer.Reset(c.clock.real(every))
		case err == nil:
			lose("the database refused the renewal")
			return
		case ctx.Err() != nil:
			return
		default:
			timer.Reset(c.clock.real(max(min(retry, ls.left()), 0)))
		}
	}
}

// leaseTransport is pgledger's Ledger.Transport: no request once the
// lease is gone by the replica's clock.
type leaseTransport struct {
	ls   *replicaLease
	base http.RoundTripper
}

func (t *leaseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if reason := t.ls.short(0); reason != "" {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s %s: %s", errReplicaFenced, req.Method, req.URL.Path, reason)
	}
	return t.base.RoundTrip(req)
}

// replicaLedger is pgledger's Ledger on the model: reads unfenced,
// every write fenced by the lease's epoch, an intent needing a third of
// the lease left, checked before and after by the replica's clock.
type replicaLedger struct {
	c  *leaseClient
	ls *replicaLease
}

var _ bandonce.Ledger = (*replicaLedger)(nil)

func (l *replicaLedger) Durable() bool { return true }

func (l *replicaLedger) read(ctx context.Context, op string, f func(bandonce.Ledger) error) error {
	var err error
	if cerr := l.c.call(ctx, op, func() { l.c.db.Read(replicaAgentID, func(r bandonce.Ledger) { err = f(r) }) }); cerr != nil {
		return cerr
	}
	return err
}

func (l *replicaLedger) write(ctx context.Context, op string, margin time.Duration, f func(bandonce.Ledger) error) error {
	if !l.c.cfg.ignoreLease {
		if reason := l.ls.short(margin); reason != "" {
			return fmt.Errorf("%w: %s: %s", errReplicaFenced, op, reason)
		}
	}
	var held bool
	var err error
	if cerr := l.c.call(ctx, op, func() {
		held = l.c.db.Write(replicaAgentID, l.ls.epoch, margin, func(r bandonce.Ledger) { err = f(r) })
	}); cerr != nil {
		return cerr
	}
	if l.c.cfg.ignoreLease {
		return err
	}
	if !held {
		return fmt.Errorf("%w: %s: the database refused it", errReplicaFenced, op)
	}
	if reason := l.ls.short(margin); reason != "" {
		return fmt.Errorf("%w: %s: %s (the write was committed)", errReplicaFenced, op, reason)
	}
	return err
}

func (l *replicaLedger) Key(ctx context.Context, room, key string) (st bandonce.KeyState, err error) {
	err = l.read(ctx, "key "+room+" "+key, func(r bandonce.Ledger) (e error) { st, e = r.Key(ctx, room, key); return e })
	return st, err
}

func (l *replicaLedger) SetKey(ctx context.Context, room, key string, state bandonce.KeyState) error {
	margin := time.Duration(0)
	if state == bandonce.KeyIntent {
		margin = l.c.lease / 3
	}
	return l.write(ctx, fmt.Sprint("set key ", room, " ", key, " ", int(state)), margin, func(r bandonce.Ledger) error {
		return r.SetKey(ctx, room, key, state)
	})
}

func (l *replicaLedger) AckPending(ctx context.Context, room, messageID string) (pending bool, err error) {
	err = l.read(ctx, "ack "+room+" "+messageID, func(r bandonce.Ledger) (e error) {
		pending, e = r.AckPending(ctx, room, messageID)
		return e
	})
	return pending, err
}

func (l *replicaLedger) SetAckPending(ctx context.Context, room, messageID string, pending bool) error {
	return l.write(ctx, fmt.Sprint("set ack ", room, " ", messageID, " ", pending), 0, func(r bandonce.Ledger) error {
		return r.SetAckPending(ctx, room, messageID, pending)
	})
}

func (l *replicaLedger) Step(ctx context.Context, room, messageID, name string) (result []byte, ok bool, err error) {
	err = l.read(ctx, "step "+room+" "+messageID+" "+name, func(r bandonce.Ledger) (e error) {
		result, ok, e = r.Step(ctx, room, messageID, name)
		return e
	})
	return result, ok, err
}

func (l *replicaLedger) SetStep(ctx context.Context, room, messageID, name string, result []byte) error {
	return l.write(ctx, "set step "+room+" "+messageID+" "+name, 0, func(r bandonce.Ledger) error {
		return r.SetStep(ctx, room, messageID, name, result)
	})
}
