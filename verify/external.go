package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/band-once/bandonce/proof"
)

// ErrExternalUnavailable is what External.Effect returns when the verifier
// makes the external system fail a call, as a flaky service would. Nothing
// was performed; a handler should fail the message so Band serves it again.
var ErrExternalUnavailable = errors.New("verify: the external system is unavailable")

// ErrLifeEnded is what External.Effect returns to a life of the agent that
// was killed: a dead process performs no effects.
var ErrLifeEnded = proof.ErrLifeEnded

// External is the agent's window onto the world outside Band, a double of
// the systems its handler changes (a payment provider, a mail server, a
// ticket tracker). Its records survive kills; every life of the agent gets
// its own External, which goes dead when the life is killed.
//
// The contract, which the verifier judges:
//
//   - Every side effect carries a natural key naming the unit of work it
//     belongs to ("refund:order-17"). Performing the effect of one key twice
//     is a violation, however many times the message was delivered.
//   - An effect is performed with the context of the work it belongs to.
//     Starting one with a context that an interrupt, a stop or a shutdown
//     already cancelled is a violation: the work went on after it was told
//     to stop. A call in flight when the context ends is cancelled and not
//     performed.
//   - A call takes a while (virtual time), may fail with
//     ErrExternalUnavailable, and may hang until its context ends; a call
//     whose life is killed while it waits may or may not have been performed,
//     as with any remote call cut off by a crash.
//
// An agent keeps its effects idempotent by asking the system first:
// Performed(key) reports what is already done, whoever did it.
type External struct {
	world *world
	obs   *observation
	life  int
	ctx   context.Context // ends when the life is killed or the schedule ends
	inner *proof.External
	// turn is the handler call this External was handed to (Shell
	// adapter); nil for the life's own, whose effects belong to the
	// life's open loop turn.
	turn *turn
}

// Started records that the agent's handler started work on a message in a
// room. The Shell adapter calls it for every handler call; an agent with its
// own loop should call it when its handler begins, so the verifier can judge
// that no work starts in a stopped room. It fails only for a dead life.
func (x *External) Started(room, messageID string) error {
	if _, err := x.inner.Started(room, messageID); err != nil {
		return err
	}
	if x.obs != nil && x.turn == nil {
		x.obs.openTurn(x.life, room, messageID, false)
	}
	return nil
}

// turnOf is the turn an effect call or question belongs to.
func (x *External) turnOf() *turn {
	if x.turn != nil || x.obs == nil {
		return x.turn
	}
	if t := x.obs.hookTurn(x.life); t != nil {
		return t
	}
	return x.obs.loopTurn(x.life)
}

// Performed reports how many times the effect named by key was performed,
// by any life of the agent.
func (x *External) Performed(key string) int {
	if x.obs != nil {
		x.obs.touch(x.turnOf(), key)
	}
	x.world.mu.Lock()
	defer x.world.mu.Unlock()
	return x.world.effects[key]
}

// Effect performs the side effect named by its natural key, with the
// context of the work it belongs to. It returns nil once the effect was
// performed; the cause of ctx when ctx ended first (nothing performed);
// ErrExternalUnavailable when the system failed the call (nothing
// performed); or ErrLifeEnded when the life was killed meanwhile.
func (x *External) Effect(ctx context.Context, key string) error {
	return x.effect(ctx, key, "")
}

func (x *External) effect(ctx context.Context, key, idempotencyKey string) error {
	w := x.world
	if x.ctx.Err() != nil {
		return ErrLifeEnded
	}
	tr := x.turnOf()
	if x.obs != nil {
		x.obs.touch(tr, key)
	}
	call := w.begin(x.life, key, idempotencyKey, ctx, tr)
	if ctx.Err() != nil {
		w.finish(call, outcomeRefused)
		return context.Cause(ctx)
	}
	d := call.latency
	if call.hang {
		d = hangFor
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		w.finish(call, outcomeCancelled)
		return context.Cause(ctx)
	case <-x.ctx.Done():
		if call.landsOnCrash {
			w.finish(call, outcomePerformed)
		} else {
			w.finish(call, outcomeCrashed)
		}
		return ErrLifeEnded
	}
	if call.fail {
		w.finish(call, outcomeFailed)
		return ErrExternalUnavailable
	}
	w.finish(call, outcomePerformed)
	return nil
}

// EffectOnce is Effect on a system that honours idempotency keys, as a
// payment API's Idempotency-Key header does: the effect named by key is
// performed unless a call with idempotencyKey was already performed, by
// any life; then it returns nil and performs nothing. key names the unit
// of work ("refund:order-17") and is what the verifier judges; the
// idempotency key is what the agent hands the system, such as the key
// bandonce's Message.Step gives its fn. A key that changes between
// deliveries therefore performs the unit of work twice.
func (x *External) EffectOnce(ctx context.Context, idempotencyKey, key string) error {
	w := x.world
	w.mu.Lock()
	served, busy := w.served[idempotencyKey], w.inFlight[idempotencyKey]
	if !served && !busy {
		w.inFlight[idempotencyKey] = true
	}
	w.mu.Unlock()
	switch {
	case served:
		if x.obs != nil {
			x.obs.touch(x.turnOf(), key) // the turn called it: the system did nothing more
		}
		return nil
	case busy:
		// As such an API answers a second request while the first is
		// still running: try again later.
		return ErrExternalUnavailable
	}
	defer func() {
		w.mu.Lock()
		delete(w.inFlight, idempotencyKey)
		w.mu.Unlock()
	}()
	return x.effect(ctx, key, idempotencyKey)
}

// hangFor is how long a hanging call waits (virtual time) unless its
// context ends first: long beside any handler's work, short enough that an
// agent that ignores its context still ends the schedule.
const hangFor = 20 * time.Second

// externalPlan is how the external system behaves in one schedule. It is
// drawn from the schedule's seed, so a replay behaves the same.
type externalPlan struct {
	seed uint64
	// latency bounds one call's duration.
	minLatency, maxLatency time.Duration
	// failures is how many first calls of a failing key fail, and how
	// many deliveries of one message such failures may fail at most: the
	// agent's failure budget is per message, however many effects it
	// performs. failShare is the share of keys that fail.
	failures  int
	failShare float64
	// landShare is the chance that a call cut off by a kill was performed.
	landShare float64
	// hangKey's call number hangNth (1-based) hangs for hangFor unless
	// its context ends.
	hangKey string
	hangNth int
}

// String describes the plan in one line, for witnesses.
func (p externalPlan) String() string {
	s := fmt.Sprintf("external system: calls take %s to %s", p.minLatency, p.maxLatency)
	if p.failures > 0 && p.failShare > 0 {
		s += fmt.Sprintf("; %.0f%% of effect keys fail their first %d call(s), at most %d deliveries of a message", 100*p.failShare, p.failures, p.failures)
	}
	if p.hangKey != "" {
		s += fmt.Sprintf("; call %d of effect %q hangs for %s unless its context ends", p.hangNth, p.hangKey, hangFor)
	}
	return s
}

// callOutcome is how one Effect call ended.
type callOutcome int

const (
	outcomeRunning callOutcome = iota
	outcomePerformed
	outcomeRefused   // its context had already ended when it was made
	outcomeCancelled // its context ended while it waited
	outcomeFailed    // the system failed it
	outcomeCrashed   // its life was killed while it waited; not performed
)

// effectCall is one call of External.Effect.
type effectCall struct {
	life         int
	key          string
	nth          int // this key's call number, from 1
	requests     int // requests the agent had completed when it was made
	at           time.Duration
	latency      time.Duration
	hang, fail   bool
	landsOnCrash bool
	// cause is why its context had ended, for refused calls.
	cause   error
	outcome callOutcome
	// uncancellable: its context can never end (context.Background and
	// the like), which a hanging call turns into a handler stuck forever.
	uncancellable bool
	// turn is the delivery it belongs to (nil if the verifier cannot
	// tell); begin and end order the call with the engine's ticks (end
	// is 0 while it runs), endAt is when it ended (virtual time).
	turn       *turn
	begin, end int64
	endAt      time.Time
	// idempotencyKey is the key an EffectOnce call carried, "" for Effect.
	idempotencyKey string
}

// world is the external system's state for one run of a schedule.
type world struct {
	plan  externalPlan
	start time.Time
	// requests reports how many requests the agent has completed; tick
	// reads the engine's order clock.
	requests func() int
	tick     func() int64

	mu      sync.Mutex
	effects map[string]int
	calls   []*effectCall
	perKey  map[string]int
	// served are the idempotency keys of performed EffectOnce calls;
	// inFlight those of calls still running.
	served, inFlight map[string]bool
	// failedTurns are, per message, the deliveries a failure was injected
	// into: the plan's failures bound them, not the calls.
	failedTurns map[string]map[*turn]bool
	// modelCalls counts the Model double's calls.
	modelCalls int
}

func newWorld(plan externalPlan, requests func() int) *world {
	return &world{plan: plan, start: time.Now(), requests: requests, effects: map[string]int{}, perKey: map[string]int{}, served: map[string]bool{}, inFlight: map[string]bool{}, failedTurns: map[string]map[*turn]bool{}}
}

// keyRand is a generator for one key's draws: the same for every run of
// the schedule, whatever order the calls come in.
func (w *world) keyRand(key string, nth int) *rand.Rand {
	h := w.plan.seed
	for _, c := range key {
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	return rand.New(rand.NewPCG(h, uint64(nth)))
}

func (w *world) begin(life int, key, idempotencyKey string, ctx context.Context, tr *turn) *effectCall {
	w.mu.Lock()
	w.perKey[key]++
	nth := w.perKey[key]
	w.mu.Unlock()
	r := w.keyRand(key, nth)
	p := w.plan
	c := &effectCall{life: life, key: key, nth: nth, at: time.Since(w.start), latency: p.minLatency, uncancellable: ctx.Done() == nil, turn: tr, idempotencyKey: idempotencyKey}
	if w.tick != nil {
		c.begin = w.tick()
	}
	if span := p.maxLatency - p.minLatency; span > 0 {
		c.latency += time.Duration(r.Int64N(int64(span)))
	}
	keyFails := w.keyRand(key, 0).Float64() < p.failShare
	c.landsOnCrash = r.Float64() < p.landShare
	c.hang = key == p.hangKey && nth == p.hangNth
	if ctx.Err() != nil {
		c.cause = context.Cause(ctx)
	}
	if w.requests != nil {
		c.requests = w.requests()
	}
	w.mu.Lock()
	c.fail = keyFails && nth <= p.failures && w.mayFailLocked(tr)
	w.calls = append(w.calls, c)
	w.mu.Unlock()
	return c
}

// mayFailLocked reports whether a failure may be injected into the
// delivery tr, and counts it: a message's deliveries that failed stay
// within the plan's failures, so a message is never given up on because
// it performs several effects. A call the verifier cannot attribute to a
// delivery is bounded by its key alone.
func (w *world) mayFailLocked(tr *turn) bool {
	if tr == nil {
		return true
	}
	failed := w.failedTurns[tr.msg]
	if failed == nil {
		failed = map[*turn]bool{}
		w.failedTurns[tr.msg] = failed
	}
	if !failed[tr] && len(failed) >= w.plan.failures {
		return false
	}
	failed[tr] = true
	return true
}

func (w *world) finish(c *effectCall, o callOutcome) {
	var tick int64
	if w.tick != nil {
		tick = w.tick()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c.outcome, c.end, c.endAt = o, tick, time.Now()
	if o == outcomePerformed {
		w.effects[c.key]++
		if c.idempotencyKey != "" {
			w.served[c.idempotencyKey] = true
		}
	}
}

// snapshot returns copies of the calls and the effect counts.
func (w *world) snapshot() ([]effectCall, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := make([]effectCall, len(w.calls))
	for i, c := range w.calls {
		calls[i] = *c
	}
	effects := make(map[string]int, len(w.effects))
	for k, v := range w.effects {
		effects[k] = v
	}
	return calls, effects
}

// sortedKeys returns m's keys in order, for stable reports.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
