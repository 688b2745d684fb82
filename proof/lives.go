package proof

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// life is one run of the agent, from its factory call until it returns.
type life struct {
	n       int
	severed bool          // guarded by gate.mu
	dead    chan struct{} // closed when severed
	ext     *External
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // set before done closes
	// superseded: Band told this life another connection took over, so
	// it may stop on its own.
	superseded bool

	socketBytes atomic.Int64  // bytes the agent read from its sockets
	socketsOpen atomic.Int32  // its socket connections that are up
	sockets     atomic.Int32  // the socket upgrades it asked for
	arrivals    *pushArrivals // the sim's: control pushes the agent read
	order       *orderClock   // the sim's
	// supersedeFrame is what Band's supersede push to this agent looks
	// like on the wire; supersede is what the life heard of it.
	supersedeFrame []byte
	supersede      superseding

	// replica is the slot the life runs in (Env.Replica); leading the
	// lease epoch it says it leads under (Env.Leading), 0 when it does
	// not; pausedUntil, while it is paused (Pause), when it wakes, in
	// virtual Unix nanoseconds.
	replica     int
	leading     atomic.Int64
	pausedUntil atomic.Int64
	// terms are the order ticks at which the life began to lead, each
	// term a new shell that remembers nothing of the last one's signals.
	termsMu sync.Mutex
	terms   []int64
	// handingOver is when the engine asked the life to hand over
	// (Handover), zero unless it did: it may then return.
	handingOver time.Time
	// ended: the engine has ended the life (guarded by the driver).
	ended bool
}

// mayStop reports whether the life may return on its own: Band told it
// another connection took over.
func (l *life) mayStop() bool {
	heard, _ := l.supersedeHeard()
	return l.superseded || heard || !l.handingOver.IsZero()
}

// termStart notes that a new term of the life began: it leads again.
func (l *life) termStart() {
	l.termsMu.Lock()
	defer l.termsMu.Unlock()
	l.terms = append(l.terms, l.order.next())
}

// termEnd is the tick at which the term of the life in progress at tick
// ended because a new one began, or the end of time if none did: a
// signal the shell of one term heard, the next term's shell never did.
func (l *life) termEnd(tick int64) int64 {
	l.termsMu.Lock()
	defer l.termsMu.Unlock()
	for _, t := range l.terms {
		if t > tick {
			return t
		}
	}
	return math.MaxInt64
}

func (l *life) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// startLife starts a fresh agent from the factory on the same fake, in
// the replica's slot.
func (s *sim) startLife(replica int) {
	s.lives++
	l := &life{n: s.lives, done: make(chan struct{}), dead: make(chan struct{}), arrivals: &s.arrivals,
		order: s.order, supersedeFrame: s.supersedeFrame, replica: replica}
	s.allLives = append(s.allLives, l)
	l.ext = s.world.forLife(l.n)
	env := Env{
		HTTPClient: &http.Client{Transport: &transport{g: s.gate, l: l}},
		BaseURL:    s.band.BaseURL(),
		SocketURL:  s.band.SocketURL(),
		APIKey:     s.agent.Key,
		AgentID:    s.agent.ID,
		External:   l.ext,
		Life:       l.n,
		Seed:       uint64(s.sched.Seed)*1_000_003 + uint64(l.n),
		Replica:    replica,
	}
	if s.reps != nil {
		s.reps.equip(&env, l, s.gate)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	agent := s.factory()
	s.slots[replica] = l
	s.trace("life %d starts (replica %d)", l.n, replica)
	go func() {
		defer s.noteExit()
		defer close(l.done)
		defer func() {
			if v := recover(); v != nil {
				l.err = fmt.Errorf("the agent panicked: %v", v)
			}
		}()
		l.err = agent(ctx, env)
	}()
}

// kill crashes life l: its connections are severed and its External
// goes dead at once, then its context is cancelled and the engine waits
// for it to return before starting the next life in its slot.
func (s *sim) kill(l *life) {
	if s.reps != nil {
		s.reps.ended(l, "death")
	}
	if s.end(l) {
		s.startLife(l.replica)
	}
}

// stopLife ends the last lives the same way once the verdict is in: from
// the sever on, nothing the agent does reaches the fake.
func (s *sim) stopLife() {
	for _, l := range s.slots {
		s.end(l)
	}
}

// noteExit wakes the driver when a life returns.
func (s *sim) noteExit() {
	select {
	case s.exits <- struct{}{}:
	default:
	}
}

// anySocketOpen reports whether a life has a socket connection up.
func (s *sim) anySocketOpen() bool {
	for _, l := range s.slots {
		if l != nil && l.socketsOpen.Load() > 0 {
			return true
		}
	}
	return false
}

// end severs and cancels l and waits for it; false (and a violation) if
// it does not return within killGrace.
func (s *sim) end(l *life) bool {
	s.trace("life %d ends", l.n)
	l.ended = true
	s.gate.sever(l)
	l.ext.dead.Store(true)
	for _, c := range s.controls {
		c.waiting = false // a late push still held dies with the socket
	}
	l.cancel()
	if s.reps == nil || l.socketsOpen.Load() > 0 {
		s.band.DropSockets(s.agent.ID) // a standby has no socket to drop
	}
	if s.await(l, killGrace, tick) {
		return true
	}
	if s.failure == nil {
		s.failure = &Violation{Invariant: AgentLifecycle,
			Reason: fmt.Sprintf("the agent (life %d) kept running %s after its context was cancelled", l.n, killGrace)}
	}
	// Virtual time stops when the bubble's root returns, so a late agent
	// is waited out here, or the bubble could never finish.
	s.await(l, abandonAfter, time.Hour)
	return false
}

// abandonAfter is how long a late agent is waited out before the engine
// gives up on it (the bubble then reports it blocked forever).
const abandonAfter = 48 * time.Hour

// await waits, in steps of step, until l has returned or d has passed.
func (s *sim) await(l *life, d, step time.Duration) bool {
	limit := time.Now().Add(d)
	for !l.exited() {
		s.steps.Add(1)
		if !time.Now().Before(limit) {
			return false
		}
		t := time.NewTimer(step)
		select {
		case <-l.done:
		case <-t.C:
		}
		t.Stop()
	}
	return true
}
