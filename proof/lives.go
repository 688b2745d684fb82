package proof

import (
	"context"
	"fmt"
	"net/http"
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
}

// mayStop reports whether the life may return on its own: Band told it
// another connection took over.
func (l *life) mayStop() bool {
	heard, _ := l.supersedeHeard()
	return l.superseded || heard
}

func (l *life) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// startLife starts a fresh agent from the factory on the same fake.
func (s *sim) startLife() {
	s.lives++
	l := &life{n: s.lives, done: make(chan struct{}), dead: make(chan struct{}), arrivals: &s.arrivals,
		order: s.order, supersedeFrame: s.supersedeFrame}
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
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	agent := s.factory()
	s.life = l
	s.trace("life %d starts", l.n)
	go func() {
		defer close(l.done)
		defer func() {
			if v := recover(); v != nil {
				l.err = fmt.Errorf("the agent panicked: %v", v)
			}
		}()
		l.err = agent(ctx, env)
	}()
}

// kill crashes the current life: its connections are severed and its
// External goes dead at once, then its context is cancelled and the
// engine waits for it to return before starting the next life.
func (s *sim) kill() {
	if s.end(s.life) {
		s.startLife()
	}
}

// stopLife ends the last life the same way once the verdict is in: from
// the sever on, nothing the agent does reaches the fake.
func (s *sim) stopLife() { s.end(s.life) }

// end severs and cancels l and waits for it; false (and a violation) if
// it does not return within killGrace.
func (s *sim) end(l *life) bool {
	s.trace("life %d ends", l.n)
	s.gate.sever(l)
	l.ext.dead.Store(true)
	for _, c := range s.controls {
		c.waiting = false // a late push still held dies with the socket
	}
	l.cancel()
	s.band.DropSockets(s.agent.ID)
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
