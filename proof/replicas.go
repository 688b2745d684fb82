package proof

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The engine's side of a schedule with replicas (Schedule.Replicas of 2
// or more): N lives at once, one per replica, each started again when it
// dies; their calls to the shared ledger, parked and released one at a
// time like their requests to Band, so that a schedule replays; pauses,
// ledger outages and lost ledger answers; graceful hand-overs; and the
// ground truth the replica invariants are judged from.

// Errors a replica's ledger call gets from the engine.
var (
	// ErrLedgerUnreachable: the shared ledger is down (LedgerOutage);
	// the call was not applied.
	ErrLedgerUnreachable = errors.New("proof: the ledger is unreachable")
	// ErrLedgerAnswerLost: the call was applied and its answer lost
	// (LoseLedgerAnswer).
	ErrLedgerAnswerLost = errors.New("proof: the ledger applied the call and its answer was lost")
)

// handoverRestart is how long after a hand-over began its replica starts
// again: the deploy of the new version, during which the standby must
// take over.
const handoverRestart = 2 * time.Second

// handoverBar is the longest a graceful hand-over may take, from the
// holder's stop to the new holder's first request to Band.
const handoverBar = time.Second

// deathBar is the longest a failover after the holder's death may take:
// the lease and a hundredth of it. The holder dies with at most a lease
// left (the storm draws deaths right after an acquisition or renewal,
// when all of it is), which no standby may cut short; the standby wakes
// when the lease runs out as the database reported it, never late, and
// the hundredth is for the takeover's own steps (a refused early
// acquisition, the acquisition, the new shell's first request).
// docs/ledgers.md explains why "under the lease" cannot be promised.
func deathBar(lease time.Duration) time.Duration { return lease + lease/100 }

// DefaultLeaseTime is the replicas' lease under the prover: pgledger's
// default, so that failover times compare with production's.
const DefaultLeaseTime = 10 * time.Second

// ledgerVerdict is what the driver decides for a parked ledger call.
type ledgerVerdict int

const (
	ledgerApply ledgerVerdict = iota
	ledgerDown
	ledgerLoseAnswer
	ledgerSevered
)

// ledgerCall is one call to the shared ledger waiting at the gate.
type ledgerCall struct {
	life    *life
	op      string
	arrival int
	verdict chan ledgerVerdict
}

// replicaState is what the engine knows of the replicas and their lease.
type replicaState struct {
	s     *sim
	lease time.Duration

	mu sync.Mutex
	// latest is the highest epoch any life said it leads under.
	latest int64
	// fenced are the requests to Band sent by a life not leading under
	// the latest epoch, described; sends counts every request judged.
	fenced []string
	sends  int
	// ending is the holder's death or hand-over whose failover is being
	// timed: from at until the first request of a life leading under a
	// later epoch than its own.
	ending    *ending
	failovers []Failover

	ledgerDownUntil time.Time
	loseAnswers     int
	arrivals        int
}

// ending is a holder's end, for the failover it starts.
type ending struct {
	kind  string // "death" or "handover"
	epoch int64
	life  int
	at    time.Time
	// outage: the ledger was down, or lost an answer, at some point
	// after it: the takeover waited for the ledger. excused says why
	// else the takeover is not held to its bar.
	outage  bool
	excused string
	// returned: the holder handing over has returned from it (its
	// release, handedOver); until then it drains.
	returned bool
}

// Failover is one takeover the engine timed: after the holder's death
// or hand-over, until a replica leading under a later epoch sent its
// first request to Band.
type Failover struct {
	// Kind is "death" or "handover". A hand-over whose holder's lease ran
	// out while it still drained (a request of its in flight, slow) is
	// taken over by the lease, not by a release, and is timed as a death:
	// the takeover waited for the lease, as after a death.
	Kind string
	// Took is how long it took, in virtual time.
	Took time.Duration
	// Excused, when set, says why the failover is held to neither bar:
	// the ledger was unreachable meanwhile or lost an answer (the
	// takeover waited for it), the holder was paused when it was asked
	// to hand over (it could not until it woke), or no other replica was
	// running (the takeover waited for one to start).
	Excused string
}

func newReplicaState(s *sim, opts Options) *replicaState {
	return &replicaState{s: s, lease: cmp.Or(opts.LeaseTime, DefaultLeaseTime)}
}

// equip gives a replica's life what it needs beyond a single agent's.
func (r *replicaState) equip(env *Env, l *life, g *gate) {
	env.Leading = func(epoch int64) { r.leading(l, epoch) }
	env.LedgerCall = func(ctx context.Context, op string, call func()) error { return g.ledgerCall(ctx, l, op, call) }
	env.Awake = func(rt http.RoundTripper) http.RoundTripper { return &awakeTransport{l: l, base: rt, stamp: g.stamp} }
}

// leading records that l leads under epoch (0: it stopped).
func (r *replicaState) leading(l *life, epoch int64) {
	l.leading.Store(epoch)
	if epoch > 0 {
		// A new term runs a new shell: a supersede the last one heard
		// (and stopped for) is not this one's, nor an interrupt.
		l.termStart()
		sp := &l.supersede
		sp.mu.Lock()
		sp.heard, sp.at, sp.tick, sp.keptWorking = false, time.Time{}, 0, ""
		sp.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latest = max(r.latest, epoch)
	r.s.trace("life %d (replica %d) leads under epoch %d", l.n, l.replica, epoch)
}

// sent judges a request to Band as it leaves life l (FencedSend), and
// ends the failover being timed if l leads under a later epoch. It runs
// under the gate's lock.
func (r *replicaState) sent(l *life, p *parkedRequest) {
	epoch := l.leading.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sends++
	if epoch == 0 || epoch < r.latest {
		why := fmt.Sprintf("life %d (replica %d) sent %s while epoch %d led", l.n, l.replica, p.order, r.latest)
		if epoch != 0 {
			why = fmt.Sprintf("life %d (replica %d), fenced at epoch %d, sent %s after epoch %d took over", l.n, l.replica, epoch, p.order, r.latest)
		}
		r.fenced = append(r.fenced, why)
	}
	if e := r.ending; e != nil && epoch > e.epoch {
		f := Failover{Kind: e.kind, Took: time.Since(e.at), Excused: e.excused}
		if e.kind == "handover" && !e.returned {
			f.Kind = "death" // taken over by the lease while the holder drained
		}
		if e.outage {
			f.Excused = "the ledger was unreachable or lost an answer meanwhile"
		}
		r.failovers = append(r.failovers, f)
		r.ending = nil
	}
}

// holder is the life leading under the latest epoch, or nil.
func (s *sim) holder() *life {
	if s.reps == nil {
		return s.slots[0]
	}
	var h *life
	for _, l := range s.slots {
		if e := l.leading.Load(); e > 0 && !l.exited() && l.handingOver.IsZero() && (h == nil || e > h.leading.Load()) {
			h = l
		}
	}
	return h
}

// ended starts timing the failover after the holder l died or handed
// over; a standby's end starts none.
func (r *replicaState) ended(l *life, kind string) {
	epoch := l.leading.Load()
	if epoch == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if epoch < r.latest {
		return // already replaced
	}
	now := time.Now()
	r.ending = &ending{kind: kind, epoch: epoch, life: l.n, at: now, outage: now.Before(r.ledgerDownUntil)}
	standby := false
	for _, o := range r.s.slots {
		standby = standby || (o != l && !o.ended && o.handingOver.IsZero() && !now.Before(time.Unix(0, o.pausedUntil.Load())))
	}
	switch {
	case !standby:
		r.ending.excused = "no other replica was running (or awake)"
	case now.Before(time.Unix(0, l.pausedUntil.Load())):
		r.ending.excused = "the holder was paused"
	}
}

// handedOver notes that l, asked to hand over, has returned: the
// hand-over's failover is timed from here, the old holder's last act
// (its release of the lease), not from the request to stop, which its
// shell's drain follows.
func (r *replicaState) handedOver(l *life) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.ending; e != nil && e.kind == "handover" && e.life == l.n {
		e.at, e.returned = time.Now(), true
	}
}

// apply carries out a replica event.
func (r *replicaState) apply(ev Event) {
	s := r.s
	switch ev.Kind {
	case Pause:
		h := s.holder()
		if h == nil {
			return // nobody leads: nothing to pause
		}
		// A pause of a paused holder can only make it longer.
		h.pausedUntil.Store(max(h.pausedUntil.Load(), time.Now().Add(ev.Delay).UnixNano()))
		s.faults["pause_holder"]++
		if ev.Delay > r.lease {
			s.faults["pause_past_lease"]++
		}
	case LedgerOutage:
		r.mu.Lock()
		r.ledgerDownUntil = time.Now().Add(ev.Delay)
		if r.ending != nil {
			r.ending.outage = true
		}
		r.mu.Unlock()
		s.faults["ledger_outage"]++
	case LoseLedgerAnswer:
		r.mu.Lock()
		r.loseAnswers++
		r.mu.Unlock()
	case Handover:
		h := s.holder()
		if h == nil {
			return
		}
		s.faults["handover"]++
		r.ended(h, "handover")
		s.handOver(h)
	}
}

// handOver stops l gracefully, as a deploy does: its context ends and it
// finishes (its requests and ledger calls still served) and returns; then
// drive starts its replica again, as a standby.
func (s *sim) handOver(l *life) {
	s.trace("life %d hands over", l.n)
	l.handingOver = time.Now()
	l.cancel()
}

// step releases one parked ledger call, if any, and reports whether it
// did. Calls go first by life, then op, then arrival: lives and ops
// differ between goroutines, so the order does not depend on scheduling.
func (r *replicaState) step(now time.Time) bool {
	g := r.s.gate
	g.mu.Lock()
	if len(g.ledger) == 0 {
		g.mu.Unlock()
		return false
	}
	best := 0
	for i, c := range g.ledger {
		b := g.ledger[best]
		if c.life.n < b.life.n || (c.life.n == b.life.n && (c.op < b.op || (c.op == b.op && c.arrival < b.arrival))) {
			best = i
		}
	}
	c := g.ledger[best]
	g.ledger = slices.Delete(g.ledger, best, best+1)
	g.mu.Unlock()

	r.mu.Lock()
	v := ledgerApply
	switch {
	case now.Before(r.ledgerDownUntil):
		v = ledgerDown
		r.s.faults["ledger_call_refused"]++
	case r.loseAnswers > 0:
		r.loseAnswers--
		v = ledgerLoseAnswer
		if r.ending != nil {
			r.ending.outage = true
		}
		r.s.faults["ledger_answer_lost"]++
	}
	r.mu.Unlock()
	r.s.trace("ledger call (life %d): %s: %v", c.life.n, c.op, v)
	c.verdict <- v
	return true
}

// ledgerCall parks one call of life l to the shared ledger until the
// driver decides it, holding it while l is paused.
func (g *gate) ledgerCall(ctx context.Context, l *life, op string, call func()) error {
	if err := l.awake(ctx); err != nil {
		return err
	}
	c := &ledgerCall{life: l, op: op, verdict: make(chan ledgerVerdict, 1)}
	g.mu.Lock()
	if l.severed {
		g.mu.Unlock()
		return errSevered
	}
	g.reps.mu.Lock()
	g.reps.arrivals++
	c.arrival = g.reps.arrivals
	g.reps.mu.Unlock()
	g.ledger = append(g.ledger, c)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	var v ledgerVerdict
	select {
	case v = <-c.verdict:
	case <-ctx.Done():
		g.mu.Lock()
		i := slices.Index(g.ledger, c)
		if i >= 0 {
			g.ledger = slices.Delete(g.ledger, i, i+1)
		}
		g.mu.Unlock()
		if i >= 0 {
			return context.Cause(ctx)
		}
		v = <-c.verdict
	}
	switch v {
	case ledgerSevered:
		return errSevered
	case ledgerDown:
		return ErrLedgerUnreachable
	}
	call()
	if v == ledgerLoseAnswer {
		return ErrLedgerAnswerLost
	}
	// The answer is read once the life is awake again.
	if err := l.awake(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if g.isSevered(l) {
		return errSevered
	}
	return nil
}

// awake returns once l is not paused, or at once with errSevered when l
// was killed meanwhile; ctx ending ends the wait too.
func (l *life) awake(ctx context.Context) error {
	for {
		until := time.Unix(0, l.pausedUntil.Load())
		d := time.Until(until)
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-l.dead:
			t.Stop()
			return errSevered
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
}

// awakeTransport holds a paused life's requests until it wakes, and the
// answers it gets while paused until then.
type awakeTransport struct {
	l     *life
	base  http.RoundTripper
	stamp func() int // the fake's current event sequence number
}

// leftAtKey marks a request held while its life was paused with the
// fake's sequence number when it was made: it had passed the shell's
// last check then (a paused process is frozen between that check and its
// write), so it left the agent then, whenever the wire carries it.
type leftAtKey struct{}

func (t *awakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if time.Now().Before(time.Unix(0, t.l.pausedUntil.Load())) {
		req = req.WithContext(context.WithValue(req.Context(), leftAtKey{}, t.stamp()))
	}
	if err := t.l.awake(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && !isUpgrade(req) {
		if werr := t.l.awake(req.Context()); werr != nil {
			drain(resp)
			return nil, werr
		}
	}
	return resp, err
}

// judge adds the replica invariants to v: FencedSend, and the failover
// bars.
func (r *replicaState) judge(v *judgement) []Failover {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range r.sends {
		v.Check(FencedSend)
	}
	for _, why := range r.fenced {
		v.Fail(FencedSend, "%s", why)
	}
	for _, f := range r.failovers {
		v.Check(FailoverBound)
		switch {
		case f.Excused != "":
			// An unreachable ledger holds every replica up: the
			// takeover waits for it, whatever the lease.
		case f.Kind == "death" && f.Took >= deathBar(r.lease):
			v.Fail(FailoverBound, "a failover after the holder's death took %s, not under %s (the %s lease and a hundredth)", f.Took, deathBar(r.lease), r.lease)
		case f.Kind == "handover" && f.Took >= handoverBar:
			v.Fail(FailoverBound, "a graceful hand-over took %s, not under %s", f.Took, handoverBar)
		}
	}
	return append([]Failover(nil), r.failovers...)
}
