package proof

import (
	"fmt"
	"testing"

	"github.com/band-once/bandonce/internal/ddmin"
)

// Shrink delta-debugs a violating schedule: it drops events, and then
// simplifies what is left, for as long as the same invariant still fails,
// and returns the smallest schedule found with its result. The engine is
// deterministic, so every trial is a plain re-run. budget bounds the
// trials; zero means 600. Within the budget the result is 1-minimal:
// dropping any one of its events makes the violation go away.
func Shrink(t *testing.T, s *Schedule, opts Options, inv Invariant, budget int) (*Schedule, Result) {
	if budget <= 0 {
		budget = 600
	}
	sh := &shrinker{t: t, opts: opts, inv: inv, budget: budget, best: s.clone()}
	sh.res = Simulate(t, sh.best, opts)
	sh.trials = 1
	if sh.res.Violation == nil || sh.res.Violation.Invariant != inv {
		return sh.best, sh.res // not reproducible as given; nothing to shrink
	}
	// The passes repeat until a round changes nothing: simplifying an
	// event can make another one droppable.
	ddmin.Rounds(sh.fingerprint, sh.Spent, func() {
		ddmin.DropChunks(sh)
		sh.dropRealigned()
		ddmin.Simplify(sh, simplifications, false)
		if sh.best.Durable {
			c := sh.best.clone()
			c.Durable = false
			sh.try(c)
		}
		if c := compactRooms(sh.best); c != nil {
			sh.try(c)
		}
	})
	return sh.best, sh.res
}

// shrinker is a ddmin.Search over a schedule's events; the engine is
// deterministic, so it tries one candidate at a time.
type shrinker struct {
	t      *testing.T
	opts   Options
	inv    Invariant
	budget int
	trials int
	best   *Schedule
	res    Result
}

func (sh *shrinker) Spent() bool { return sh.trials >= sh.budget }

func (sh *shrinker) Events() []Event { return sh.best.Events }

// TryAll tries the best schedule with each list of events in turn, and
// stops at the first that still fails.
func (sh *shrinker) TryAll(events [][]Event) bool {
	for _, e := range events {
		c := sh.best.clone()
		c.Events = e
		if sh.try(c) {
			return true
		}
	}
	return false
}

// try runs c and keeps it if the same invariant still fails.
func (sh *shrinker) try(c *Schedule) bool {
	if sh.Spent() {
		return false
	}
	sh.trials++
	r := Simulate(sh.t, c, sh.opts)
	if r.Violation != nil && r.Violation.Invariant == sh.inv {
		sh.best, sh.res = c, r
		return true
	}
	return false
}

func (sh *shrinker) fingerprint() string {
	return fmt.Sprint(sh.best.Rooms, sh.best.Durable, sh.best.Events)
}

// maxShift bounds how far later events move when one is dropped: about
// the requests one message costs, twice over.
const maxShift = 8

// dropRealigned retries each drop with the later events moved earlier:
// dropping an event shifts the request indices of everything after it,
// which can make a kill miss the request it needed.
func (sh *shrinker) dropRealigned() {
	for dropped := true; dropped && !sh.Spent(); {
		dropped = false
		for i := len(sh.best.Events) - 1; i >= 0 && !dropped && !sh.Spent(); i-- {
			for shift := 1; shift <= maxShift && !dropped; shift++ {
				dropped = sh.try(dropShifted(sh.best, i, shift))
			}
		}
	}
}

// dropShifted is s without event i, with the events after it due shift
// requests earlier (never before request 1).
func dropShifted(s *Schedule, i, shift int) *Schedule {
	c := s.clone()
	c.Events = append(c.Events[:i], c.Events[i+1:]...)
	for j := i; j < len(c.Events); j++ {
		if c.Events[j].At > 0 {
			c.Events[j].At = max(c.Events[j].At-shift, 1)
		}
	}
	return c
}

// simplifications each make one field of an event plainer; false when
// there was nothing to simplify.
var simplifications = []func(*Event) bool{
	func(e *Event) bool { return ddmin.Zero(&e.Spec.Slow) },
	func(e *Event) bool { return ddmin.Zero(&e.Spec.Fails) },
	func(e *Event) bool {
		if e.Spec.Outcome == PanicThenReply {
			e.Spec.Outcome = Reply
			return true
		}
		return false
	},
	func(e *Event) bool { return ddmin.Zero(&e.Spec.Key) },
	func(e *Event) bool { return ddmin.Zero(&e.Spec.Text) },
	func(e *Event) bool { return ddmin.Zero(&e.Spec.Quotes) },
	func(e *Event) bool { return ddmin.Zero(&e.After) },
	func(e *Event) bool {
		if e.Kind == PushFault || e.Push == PushNormal {
			return false
		}
		e.Push, e.Delay = PushNormal, 0
		return true
	},
	func(e *Event) bool { return ddmin.One(&e.Count) },
}

// compactRooms is s with only the rooms its events name, renumbered in
// order; nil when every room is named.
func compactRooms(s *Schedule) *Schedule {
	used := make([]bool, s.Rooms)
	for _, e := range s.Events {
		if e.Room >= 0 && e.Room < s.Rooms && (e.Kind == Say || e.Kind == Interrupt || e.Kind == Stop || e.Kind == Play) {
			used[e.Room] = true
		}
	}
	index, n := ddmin.RoomIndex(used)
	if n == s.Rooms || n == 0 {
		return nil
	}
	c := s.clone()
	c.Rooms = n
	for i := range c.Events {
		if r := c.Events[i].Room; r >= 0 && r < len(index) {
			c.Events[i].Room = index[r]
		}
		if c.Events[i].Kind == Say {
			c.Events[i].Spec.Label = ddmin.Relabel(c.Events[i].Spec.Label, c.Events[i].Room)
			if c.Events[i].Spec.Quotes != "" {
				c.Events[i].Spec.Quotes = ddmin.Relabel(c.Events[i].Spec.Quotes, c.Events[i].Room)
			}
		}
	}
	return c
}
