package proof

import (
	"fmt"
	"testing"
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
	for {
		before := sh.fingerprint()
		sh.ddmin()
		sh.dropRealigned()
		sh.simplify()
		if sh.best.Durable {
			c := sh.best.clone()
			c.Durable = false
			sh.try(c)
		}
		if c := compactRooms(sh.best); c != nil {
			sh.try(c)
		}
		if sh.fingerprint() == before || sh.spent() {
			break
		}
	}
	return sh.best, sh.res
}

type shrinker struct {
	t      *testing.T
	opts   Options
	inv    Invariant
	budget int
	trials int
	best   *Schedule
	res    Result
}

func (sh *shrinker) spent() bool { return sh.trials >= sh.budget }

// try runs c and keeps it if the same invariant still fails.
func (sh *shrinker) try(c *Schedule) bool {
	if sh.spent() {
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

// ddmin drops chunks of events, halving the chunk size whenever no chunk
// can go, down to single events.
func (sh *shrinker) ddmin() {
	n := 2
	for len(sh.best.Events) > 0 && !sh.spent() {
		events := sh.best.Events
		size := (len(events) + n - 1) / n
		dropped := false
		for start := 0; start < len(events) && !dropped; start += size {
			c := sh.best.clone()
			c.Events = append(append([]Event(nil), events[:start]...), events[min(start+size, len(events)):]...)
			if sh.try(c) {
				dropped = true
				n = max(n-1, 2)
			}
		}
		if !dropped {
			if size == 1 {
				return
			}
			n = min(n*2, len(events))
		}
	}
}

// maxShift bounds how far later events move when one is dropped: about
// the requests one message costs, twice over.
const maxShift = 8

// dropRealigned retries each drop with the later events moved earlier:
// dropping an event shifts the request indices of everything after it,
// which can make a kill miss the request it needed.
func (sh *shrinker) dropRealigned() {
	for dropped := true; dropped && !sh.spent(); {
		dropped = false
		for i := len(sh.best.Events) - 1; i >= 0 && !dropped && !sh.spent(); i-- {
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

// simplify makes each remaining event plainer, one field at a time.
func (sh *shrinker) simplify() {
	for i := 0; i < len(sh.best.Events) && !sh.spent(); i++ {
		for _, plainer := range simplifications {
			c := sh.best.clone()
			if plainer(&c.Events[i]) {
				sh.try(c)
			}
		}
	}
}

// simplifications each make one field of an event plainer; false when
// there was nothing to simplify.
var simplifications = []func(*Event) bool{
	func(e *Event) bool { return zero(&e.Spec.Slow) },
	func(e *Event) bool { return zero(&e.Spec.Fails) },
	func(e *Event) bool {
		if e.Spec.Outcome == PanicThenReply {
			e.Spec.Outcome = Reply
			return true
		}
		return false
	},
	func(e *Event) bool { return zero(&e.Spec.Key) },
	func(e *Event) bool { return zero(&e.Spec.Text) },
	func(e *Event) bool { return zero(&e.Spec.Quotes) },
	func(e *Event) bool { return zero(&e.After) },
	func(e *Event) bool {
		if e.Kind == PushFault || e.Push == PushNormal {
			return false
		}
		e.Push, e.Delay = PushNormal, 0
		return true
	},
	func(e *Event) bool {
		if e.Count > 1 {
			e.Count = 1
			return true
		}
		return false
	},
}

func zero[T comparable](p *T) bool {
	var z T
	if *p == z {
		return false
	}
	*p = z
	return true
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
	index := make([]int, s.Rooms)
	n := 0
	for r, u := range used {
		index[r] = n
		if u {
			n++
		}
	}
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
			c.Events[i].Spec.Label = relabel(c.Events[i].Spec.Label, c.Events[i].Room)
			if c.Events[i].Spec.Quotes != "" {
				c.Events[i].Spec.Quotes = relabel(c.Events[i].Spec.Quotes, c.Events[i].Room)
			}
		}
	}
	return c
}

// relabel renames "rXmY" to the room's new number.
func relabel(label string, room int) string {
	var r, m int
	if _, err := fmt.Sscanf(label, "r%dm%d", &r, &m); err != nil {
		return label
	}
	return fmt.Sprintf("r%dm%d", room+1, m)
}
