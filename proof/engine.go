package proof

import (
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
)

// Virtual-time limits of one schedule.
const (
	tick        = 250 * time.Millisecond  // the driver looks around at least this often
	stallAfter  = 1500 * time.Millisecond // no mark or post for this long: fire the next event
	quietFor    = time.Second             // quiet for this long before the verdict
	giveUpAfter = 5 * time.Minute         // stalled with nothing left to fire: a turn may wait minutes on a model
	deadline    = 15 * time.Minute        // the whole schedule
	killGrace   = time.Minute             // a killed agent must have returned by then
	// busyLimit is how many requests may be released at one instant of
	// virtual time: an agent that never waits on a timer between
	// requests never lets virtual time advance, and the schedule with it.
	busyLimit = 2000
)

// turnStall replaces stallAfter for an event aimed at a kind of
// request (Event.aimed) while a turn is open (turnOpen): a turn waits
// seconds on a model, a backoff or a POST settling, and a kill or
// fault aimed at its reply must wait for the reply, or a slow agent
// would never meet one. An event aimed at a request's index, a
// signal or a message fires at the stall: mid-turn is a point too.
const turnStall = 2 * time.Minute

// Simulate runs one schedule in its own synctest bubble and judges it.
// It never fails t; the verdict is in the Result.
func Simulate(t *testing.T, s *Schedule, opts Options) Result {
	opts = opts.withDefaults()
	var res Result
	var steps atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go watchSteps(s.Name, &steps, stop, stallWall, os.Stderr)
	func() {
		defer func() {
			// A bubble that cannot finish (an agent goroutine blocked
			// forever) panics when the run ends; that is a verdict too.
			if v := recover(); v != nil {
				res = Result{Schedule: s, Violation: &Violation{Invariant: AgentLifecycle,
					Reason: fmt.Sprintf("the agent left goroutines blocked forever: %v", v)}}
			}
		}()
		synctest.Test(t, func(*testing.T) {
			sm := newSim(s, opts)
			sm.steps = &steps
			res = sm.run()
		})
	}()
	return res
}

// sim is one schedule in progress. It lives on the bubble's root
// goroutine; the agent's goroutines only touch the gate and External.
type sim struct {
	sched *Schedule
	opts  Options

	band    *fakeband.Band
	agent   fakeband.Agent
	human   fakeband.Human
	rooms   []fakeband.Room
	gate    *gate
	world   *externalWorld
	factory Factory
	cleanup func()

	slots    []*life // the current life of each replica (one without replicas)
	exits    chan struct{}
	reps     *replicaState // nil without replicas
	lives    int
	allLives []*life
	order    *orderClock
	// supersedeFrame is the bytes of Band's supersede push to the agent.
	supersedeFrame []byte

	released   int
	releasedAt []time.Time // index k: when request k was released (0: start)
	cursor     int         // the next event to fire
	armed      bool        // the request-bound event at the cursor came due by time
	progress   time.Time   // the last mark, post or event
	quietSince time.Time
	start      time.Time
	// burst counts the requests released at instant, to catch an agent
	// that never lets virtual time advance.
	burst   int
	instant time.Time
	steps   *atomic.Int64 // driver steps, for the wall-clock watchdog
	busy    bool          // the busy-loop watchdog ended the run

	messages []*sentMessage
	controls []*controlRecord
	arrivals pushArrivals // control pushes that reached the agent, by correlation id
	faults   map[string]int
	quietAt  int
	stallAt  int
	failure  *Violation // an engine-level violation (quiet, lifecycle)
}

// sentMessage is one human message the engine posted.
type sentMessage struct {
	ID   string
	Room int
	Spec MessageSpec
	Seq  int // the fake's seq of its post
	// SaidAt is when it was said (virtual time), which the fake's
	// inserted_at follows.
	SaidAt time.Time
}

// controlRecord is one interrupt, stop or play the engine applied.
type controlRecord struct {
	Kind      EventKind
	Room      int // -1: every room
	Seq       int // the fake's seq of the action
	Delivered bool
	// Lost: the push cannot have reached the agent (no socket, or a
	// lost push). Until is the seq by which it had arrived: Seq for a
	// prompt push, later for a late one (unbounded if never seen).
	Lost  bool
	Until int
	Final bool
	// At is when (virtual time) a push that reached the agent at once
	// was sent; zero for one late or lost.
	At time.Time
	// CorrelationID is the push's, by which the engine sees it arrive.
	CorrelationID string
	// waiting: a late push not seen yet.
	waiting bool
	// InFlight are the reply POSTs that had left the agent when the
	// signal was sent; they may land after it without breaking anything.
	InFlight []*sendRecord
}

func newSim(s *Schedule, opts Options) *sim {
	b := fakeband.New(fakeband.Options{Seed: s.Seed, Now: virtualClock()})
	sm := &sim{sched: s, opts: opts, band: b, faults: map[string]int{}, order: &orderClock{}, steps: new(atomic.Int64)}
	sm.agent = b.AddAgent("prover")
	sm.supersedeFrame = []byte(`"agent_control:` + sm.agent.ID + `","supersede"`)
	sm.human = b.AddHuman("ada")
	for i := range max(s.Rooms, 1) {
		members := []string{sm.agent.ID}
		if s.joinsLater(i) {
			members = nil
		}
		sm.rooms = append(sm.rooms, b.AddRoom(fmt.Sprintf("room %d", i+1), sm.human, members...))
	}
	// Reply sends are only stamped when the schedule interrupts (the one
	// invariant that reads them); handler starts always are, for
	// Result.Starts.
	sendStamp := noStamp
	for _, e := range s.Events {
		if e.Kind == Interrupt {
			sendStamp = sm.stamp
		}
	}
	sm.gate = newGate(b.HTTPClient().Transport, b.Handler(), sendStamp, sm.order)
	sm.world = newExternalWorld(sm.stamp, sm.order)
	sm.slots, sm.exits = make([]*life, max(s.Replicas, 1)), make(chan struct{}, 1)
	if s.Replicas >= 2 {
		sm.reps = newReplicaState(sm, opts)
		sm.gate.reps = sm.reps
	}
	sm.factory, sm.cleanup = opts.Agent(s)
	return sm
}

func (s *sim) trace(format string, args ...any) {
	if s.opts.Trace != nil {
		s.opts.Trace(fmt.Sprintf("%8s ", time.Since(s.start).Truncate(time.Millisecond)) + fmt.Sprintf(format, args...))
	}
}

func noStamp() int { return 0 }

// stamp is the fake's current event sequence number.
func (s *sim) stamp() int { return s.band.LastEvent().Seq }

func (s *sim) run() Result {
	s.start = time.Now()
	for s.cursor < len(s.sched.Events) && s.sched.Events[s.cursor].At == 0 {
		s.apply(s.sched.Events[s.cursor])
		s.advance()
	}
	if s.sched.StartAfter > 0 {
		time.Sleep(s.sched.StartAfter) // the outage before the agent starts
	}
	for i := range s.slots {
		s.startLife(i)
	}
	s.releasedAt = []time.Time{time.Now()}
	s.progress = time.Now()
	end := time.Now().Add(deadline)
	for s.drive(end) {
	}
	s.stopLife()
	res := s.judge()
	_ = s.band.Close()
	if s.cleanup != nil {
		s.cleanup()
	}
	return res
}

// drive takes one step of the schedule; false when it is over.
func (s *sim) drive(end time.Time) bool {
	s.steps.Add(1)
	synctest.Wait()
	now := time.Now()
	if s.failure != nil {
		return false
	}
	s.notePushes()
	superseding := s.checkSuperseded(now)
	if s.failure != nil {
		return false
	}
	for i, l := range s.slots {
		if l.ended {
			// Handed over: it starts again once the deploy is done.
			if !now.Before(l.handingOver.Add(handoverRestart)) {
				s.startLife(i)
				return true
			}
			continue
		}
		if l.exited() && l.mayStop() {
			s.end(l) // it stopped as it should; a supervisor starts it again
			if l.handingOver.IsZero() {
				s.startLife(i)
			} else {
				s.reps.handedOver(l)
			}
			return true
		} else if l.exited() {
			s.failure = &Violation{Invariant: AgentLifecycle, Reason: fmt.Sprintf("the agent returned on its own (life %d): %v", l.n, l.err)}
			return false
		} else if !l.handingOver.IsZero() && now.Sub(l.handingOver) > killGrace {
			s.failure = &Violation{Invariant: AgentLifecycle, Reason: fmt.Sprintf("the agent (life %d) kept running %s after it was asked to hand over", l.n, killGrace)}
			return false
		}
	}
	if s.fireDue(now) {
		return true
	}
	if s.reps != nil && s.reps.step(now) {
		return true
	}
	if p := s.gate.pick(); p != nil {
		s.release(p, now)
		return true
	}
	if s.quiet() && !superseding {
		if s.cursor < len(s.sched.Events) {
			s.fireNext(true)
			return true
		}
		if s.quietAt == 0 {
			s.quietAt = s.released
		}
		if s.quietSince.IsZero() {
			s.quietSince = now
		}
		if now.Sub(s.quietSince) >= quietFor {
			return false
		}
	} else {
		s.quietSince = time.Time{}
		if since := now.Sub(s.progress); since >= stallAfter {
			pending := s.cursor < len(s.sched.Events)
			if s.stallAt == 0 && !pending {
				s.stallAt = s.released
			}
			switch {
			case pending && (since >= turnStall || !s.sched.Events[s.cursor].aimed() || !s.turnOpen()):
				s.fireNext(false)
				return true
			case pending:
				// A turn is open: its next request may be the one the
				// event is aimed at.
			case s.playStopped():
				return true
			case since >= giveUpAfter:
				s.failure = &Violation{Invariant: Quiet, Reason: s.stuckReason()}
				return false
			}
		}
	}
	if now.After(end) {
		s.failure = &Violation{Invariant: Quiet, Reason: "the schedule ran past its virtual deadline: " + s.stuckReason()}
		return false
	}
	s.sleep(now)
	return true
}

// sleep waits until a request parks, the next timed event is due, or a
// tick passes.
func (s *sim) sleep(now time.Time) {
	d := tick
	if due, ok := s.nextTimed(); ok && due.Sub(now) < d {
		d = max(due.Sub(now), time.Millisecond)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	// One life: its end. Replicas: any life's end (a life that ended
	// stays in its slot until its replica starts again).
	done := s.exits
	if len(s.slots) == 1 {
		done = s.slots[0].done
	}
	select {
	case <-s.gate.wake:
	case <-done:
	case <-t.C:
	}
}

// quiet: nothing in flight (parked, or held to be applied late), every
// message said and processed, no room stopped.
func (s *sim) quiet() bool {
	if !s.gate.idle() || s.gate.holds() {
		return false
	}
	for _, m := range s.messages {
		if s.band.Status(s.agent.ID, m.ID) != fakeband.StatusProcessed {
			return false
		}
	}
	for _, r := range s.rooms {
		if s.band.Stopped(s.agent.ID, r.ID) {
			return false
		}
	}
	return true
}

func (s *sim) stuckReason() string {
	var pending []string
	for _, m := range s.messages {
		if st := s.band.Status(s.agent.ID, m.ID); st != fakeband.StatusProcessed {
			pending = append(pending, fmt.Sprintf("%s is %q", m.Spec.Label, st))
		}
	}
	sort.Strings(pending)
	if len(pending) == 0 {
		return "the system did not go quiet"
	}
	return fmt.Sprintf("the system did not go quiet: %v", pending)
}

// turnOpen reports whether a turn is open (oracle.TurnOpen), from the
// claims the gate parked.
func (s *sim) turnOpen() bool {
	alive := map[int]bool{}
	for _, l := range s.slots {
		if l != nil && !l.ended && !l.exited() {
			alive[l.n] = true
		}
	}
	var claims []oracle.Claim
	for _, r := range s.gate.turnRequests() {
		if r.Kind == fakeband.EndpointProcessing {
			claims = append(claims, oracle.Claim{Room: r.Room, Msg: r.Message, Life: r.Life})
		}
	}
	return oracle.TurnOpen(s.band, s.agent.ID, claims, func(life int) bool { return alive[life] })
}

// playStopped resumes every room still stopped once nothing else is left
// to fire, so every schedule can end; it reports whether it did anything.
func (s *sim) playStopped() bool {
	played := false
	for i, r := range s.rooms {
		if s.band.Stopped(s.agent.ID, r.ID) {
			s.control(Event{Kind: Play, Room: i}, true)
			played = true
		}
	}
	return played
}

// notePushes records the arrival of late control pushes, by their
// correlation ids in what the agent read. A push queued behind another
// late one arrives after it, so the first bytes read since it was sent
// need not be it.
func (s *sim) notePushes() {
	for _, c := range s.controls {
		if c.waiting && s.arrivals.arrived(c.CorrelationID) {
			c.waiting, c.Until = false, s.stamp()
		}
	}
}

// virtualClock stamps the fake's inserted_at with the clock the agent
// reads too (the bubble's virtual time), to the microsecond as Band's
// database keeps it: one clock for Band and the agent, as with the real
// Band, so an agent's logic that compares a message's age with its own
// clock works as it would there. Messages said at one instant share a
// timestamp, and messages said within a second share its second, as in
// a busy room; the fake's default clock, a second per reading, never
// lets them.
func virtualClock() func() time.Time {
	return func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
}

// noteRelease counts the requests released at one instant of virtual
// time and fails the schedule once an agent has sent busyLimit of them
// without ever waiting on a timer.
func (s *sim) noteRelease(now time.Time) {
	if !now.Equal(s.instant) {
		s.instant, s.burst = now, 0
	}
	s.burst++
	if s.burst == busyLimit && s.failure == nil {
		s.busy = true
		s.failure = &Violation{Invariant: AgentLifecycle, Reason: fmt.Sprintf(
			"the agent never lets virtual time advance: it sent %d requests without waiting on a timer in between, a loop with no pause when there is nothing to do (a busy loop)", busyLimit)}
	}
}
