package proof

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/leaderloop"
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
	blindWait   bool // a standby's lookup never tells it when the lease runs out: it waits whole polls
}

// MaxSkewPPM bounds the clock-rate skew between a replica and the
// ledger's database that the prover draws, and that the lease's client
// allows for: 1%, pgledger.MaxClockSkew.
const MaxSkewPPM = 10_000

// ReplicaAgent is the prover's agent for schedules with replicas: every
// replica's life runs pgledger's own leader loop (internal/leaderloop,
// which pgledger's RunLeader runs) against one leasemodel database per
// schedule, the model held to pgledger's SQL by internal/leasetest, and
// while it holds the lease runs the prover's Shell on a ledger whose
// writes are fenced as pgledger's are, through a transport that refuses
// to send once the lease is gone by the replica's own clock (pgledger's
// Ledger.Transport). Each replica's clock runs at its Schedule.Skew.
// cmd/proof's -ledger pg runs pgledger itself.
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
					holder: fmt.Sprintf("replica-%d/life-%d", env.Replica, env.Life)}
				return c.run(ctx, newSkewedClock(skew))
			}
		}, nil
	}
}

// replicaAgentID names the agent's lease and records in the model.
const replicaAgentID = "agent"

// skewedClock is a replica's clock (a leaderloop.Clock): it runs ppm
// parts per million fast (slow when negative) against the bubble's, the
// database's.
type skewedClock struct {
	origin time.Time
	ppm    int
}

func newSkewedClock(ppm int) skewedClock { return skewedClock{origin: time.Now(), ppm: ppm} }

func (c skewedClock) Now() time.Time {
	return c.origin.Add(time.Duration(math.Ceil(float64(time.Since(c.origin)) * c.rate())))
}

func (c skewedClock) rate() float64 { return 1 + float64(c.ppm)/1e6 }

// Real is how long d of this clock lasts by the database's, rounded up,
// so that a timer set for d never fires before d has passed by this
// clock (one that fired a nanosecond early would spin).
func (c skewedClock) Real(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d) / c.rate()))
}

// leaseClient is one life's side of the lease: the leader loop's Store
// on the model, each statement one call through the engine.
type leaseClient struct {
	db     *leasemodel.DB
	env    Env
	cfg    ReplicaConfig
	lease  time.Duration
	holder string
}

var _ leaderloop.Store = (*leaseClient)(nil)

// errReplicaLeaseLost is the cause a replica's shell is cancelled with
// when its lease goes (pgledger.ErrLeaseLost).
var errReplicaLeaseLost = errors.New("proof: lease lost")

// errReplicaFenced is what a write or request refused by the lease gets
// (pgledger.ErrFenced).
var errReplicaFenced = errors.New("proof: refused: the lease is no longer held")

// run is RunLeader: pgledger's loop with pgledger's defaults (a poll of
// a twentieth of the lease, statements bounded by half a lease, at least
// a second), until ctx ends. A holder that ignores its lease runs its
// shell on ctx instead of the loop's: losing the lease does not stop it.
func (c *leaseClient) run(ctx context.Context, clock skewedClock) error {
	cfg := leaderloop.Config{
		AgentID: replicaAgentID, Store: c, Clock: clock, LeaseTime: c.lease, PollInterval: c.lease / 20,
		CallTimeout: max(c.lease/2, time.Second), MaxClockSkew: MaxSkewPPM / 1e6,
		Transient: func(error) bool { return true }, Lost: errReplicaLeaseLost, Log: slog.New(slog.DiscardHandler),
	}
	return leaderloop.Run(ctx, cfg, func(leadCtx context.Context, ls *leaderloop.Lease) error {
		c.env.Leading(ls.Epoch)
		defer c.env.Leading(0)
		env := c.env
		var rt http.RoundTripper = env.HTTPClient.Transport
		if c.cfg.ignoreLease {
			leadCtx = ctx
		} else {
			rt = &leaseTransport{ls: ls, base: rt}
		}
		env.HTTPClient = &http.Client{Transport: env.Awake(rt)}
		return RunShell(leadCtx, env, &replicaLedger{c: c, ls: ls}, c.cfg.Shell)
	})
}

// call is one statement through the engine, bounded as pgledger bounds
// it (half a lease, at least a second), for the ledger's reads and writes;
// the loop bounds its own.
func (c *leaseClient) call(ctx context.Context, op string, f func()) error {
	ctx, cancel := context.WithTimeout(ctx, max(c.lease/2, time.Second))
	defer cancel()
	return c.env.LedgerCall(ctx, op, f)
}

// Acquire implements leaderloop.Store.
func (c *leaseClient) Acquire(ctx context.Context) (epoch int64, err error) {
	err = c.env.LedgerCall(ctx, "acquire", func() { epoch = c.db.Acquire(replicaAgentID, c.holder, c.lease) })
	return epoch, err
}

// Lookup implements leaderloop.Store.
func (c *leaseClient) Lookup(ctx context.Context) (holder string, epoch int64, left time.Duration, found bool, err error) {
	err = c.env.LedgerCall(ctx, "lookup", func() { holder, epoch, left, found = c.db.Lookup(replicaAgentID) })
	if c.cfg.blindWait {
		found = false
	}
	return holder, epoch, left, found, err
}

// Renew implements leaderloop.Store.
func (c *leaseClient) Renew(ctx context.Context, epoch int64) (renewed bool, err error) {
	err = c.env.LedgerCall(ctx, fmt.Sprint("renew ", epoch), func() { renewed = c.db.Renew(replicaAgentID, epoch, c.lease) })
	return renewed, err
}

// Release implements leaderloop.Store.
func (c *leaseClient) Release(ctx context.Context, epoch int64) (released bool, err error) {
	err = c.env.LedgerCall(ctx, "release", func() { released = c.db.Release(replicaAgentID, epoch) })
	return released, err
}

// leaseTransport is pgledger's Ledger.Transport: no request once the
// lease is gone by the replica's clock.
type leaseTransport struct {
	ls   *leaderloop.Lease
	base http.RoundTripper
}

func (t *leaseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if reason := t.ls.Short(0); reason != "" {
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
	ls *leaderloop.Lease
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
		if reason := l.ls.Short(margin); reason != "" {
			return fmt.Errorf("%w: %s: %s", errReplicaFenced, op, reason)
		}
	}
	var held bool
	var err error
	if cerr := l.c.call(ctx, op, func() {
		held = l.c.db.Write(replicaAgentID, l.ls.Epoch, margin, func(r bandonce.Ledger) { err = f(r) })
	}); cerr != nil {
		return cerr
	}
	if l.c.cfg.ignoreLease {
		return err
	}
	if !held {
		return fmt.Errorf("%w: %s: the database refused it", errReplicaFenced, op)
	}
	if reason := l.ls.Short(margin); reason != "" {
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
