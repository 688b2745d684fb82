package proof

import (
	"fmt"
	"sync"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// supersedeGrace is how long (virtual time) an agent may take to stop
// once Band's supersede reached it: its handlers get to notice their
// cancelled context and its bookkeeping to land.
const supersedeGrace = 10 * time.Second

// superseding is what one life heard of a supersede: when the push
// reached it (read from its socket), and the first request after that
// which started new work.
type superseding struct {
	mu          sync.Mutex
	heard       bool
	at          time.Time
	tick        int64
	keptWorking fakeband.Endpoint
}

// noteSupersedeHeard records that the life read Band's supersede push.
func (l *life) noteSupersedeHeard() {
	s := &l.supersede
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.heard {
		// A paused process (Pause) reads its socket once it wakes: the
		// grace it has to stop runs from then.
		at := time.Now()
		if wake := time.Unix(0, l.pausedUntil.Load()); wake.After(at) {
			at = wake
		}
		s.heard, s.at, s.tick = true, at, l.order.next()
	}
}

// supersedeHeard reports whether and when the supersede reached the life.
func (l *life) supersedeHeard() (bool, time.Time) {
	s := &l.supersede
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard, s.at
}

// supersedeTick is the order tick at which the supersede reached the life
// (0 if it never did).
func (l *life) supersedeTick() int64 {
	s := &l.supersede
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick
}

// noteWorkAfterSupersede records a request that starts new output (see
// claimsWork), if it left the agent after the supersede reached it and
// still carries a live context when it is released: the instance was
// told to stop and did not. A request parked before the push is one the
// agent had already decided.
func (l *life) noteWorkAfterSupersede(ep fakeband.Endpoint, parked int64) {
	s := &l.supersede
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heard && parked > s.tick && s.keptWorking == "" {
		s.keptWorking = ep
	}
}

func (l *life) workAfterSupersede() fakeband.Endpoint {
	s := &l.supersede
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keptWorking
}

// checkSuperseded watches the life the supersede reached: it must stop
// within supersedeGrace (the oracle judges the work it sent). It reports
// whether the schedule must go on to see it stop: a schedule never ends
// with a superseded agent still running and no verdict on it.
func (s *sim) checkSuperseded(now time.Time) (waiting bool) {
	for _, l := range s.slots {
		heard, at := l.supersedeHeard()
		if !heard || l.exited() || (s.reps != nil && l.leading.Load() == 0) {
			continue // it stopped (a replica: it stopped leading and stands by)
		}
		// A pause drawn after the push was read (a paused holder paused
		// again) keeps the process from acting until it wakes: its grace
		// runs from then, not from the wake known when it read the push.
		if wake := time.Unix(0, l.pausedUntil.Load()); wake.After(at) {
			at = wake
		}
		if now.Sub(at) > supersedeGrace && s.failure == nil {
			s.failure = &Violation{Invariant: SupersedeStops, Reason: fmt.Sprintf(
				"the agent kept running %s after it was superseded (life %d): it must stop when another connection takes over", supersedeGrace, l.n)}
			return false
		}
		waiting = true
	}
	return waiting
}

// signals lists the control signals sent and the supersedes heard, for
// Result.Signals.
func (s *sim) signals() []Signal {
	var out []Signal
	for _, c := range s.controls {
		sig := Signal{Kind: c.Kind}
		if c.Room >= 0 {
			sig.RoomID = s.rooms[c.Room].ID
		}
		if a, ok := s.arrivals.get(c.CorrelationID); ok {
			sig.Reached, sig.Life, sig.At, sig.Tick = true, a.life, a.at, a.tick
		}
		out = append(out, sig)
	}
	for _, l := range s.allLives {
		l.supersede.mu.Lock()
		if l.supersede.heard {
			out = append(out, Signal{Kind: Supersede, Reached: true, Life: l.n, At: l.supersede.at, Tick: l.supersede.tick})
		}
		l.supersede.mu.Unlock()
	}
	return out
}

// said lists the humans' messages for Result.Said.
func (s *sim) said() []Said {
	out := make([]Said, len(s.messages))
	for i, m := range s.messages {
		out[i] = Said{ID: m.ID, RoomID: s.rooms[m.Room].ID, Label: m.Spec.Label}
	}
	return out
}
