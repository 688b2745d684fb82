package verify

import (
	"github.com/band-once/bandonce/proof"
)

// shrinkBudget bounds the re-runs spent shrinking one violation.
const shrinkBudget = 80

// shrink delta-debugs a violating trial: it drops events for as long as
// the same defect still shows, and returns the smallest trial found and its
// run. The engine is deterministic, so every try is a plain re-run.
func (r *runner) shrink(tr trial, out outcome) (trial, outcome) {
	kind := out.v.kind
	best, bestOut := tr, out
	tries := 0
	fails := func(c trial) bool {
		if tries >= shrinkBudget {
			return false
		}
		tries++
		o := r.simulate(c)
		if o.v != nil && o.v.kind == kind {
			best, bestOut = c, o
			return true
		}
		return false
	}
	// A long room's messages are its point: keep them, shrink the rest.
	var kept []proof.Event
	if says(best.sched.Events) > longRoomSays {
		kept, best.sched = splitSays(best.sched)
	}
	assemble := func(events []proof.Event) *proof.Schedule {
		return withEvents(best.sched, append(append([]proof.Event(nil), kept...), events...))
	}
	n := 2
	for len(best.sched.Events) > len(kept) && tries < shrinkBudget {
		events := best.sched.Events[len(kept):]
		size := (len(events) + n - 1) / n
		dropped := false
		for start := 0; start < len(events); start += size {
			c := best
			c.sched = assemble(append(append([]proof.Event(nil), events[:start]...), events[min(start+size, len(events)):]...))
			if fails(c) {
				dropped = true
				n = max(n-1, 2)
				break
			}
		}
		if !dropped {
			if size == 1 {
				break
			}
			n = min(n*2, len(events))
		}
	}
	if best.sched.Rooms > 1 {
		used := 0
		for _, e := range best.sched.Events {
			used = max(used, e.Room+1)
		}
		if used < best.sched.Rooms {
			c := best
			c.sched = withEvents(best.sched, best.sched.Events)
			c.sched.Rooms = max(used, 1)
			fails(c)
		}
	}
	return best, bestOut
}

// longRoomSays is how many messages make a room too long to shrink.
const longRoomSays = 12

func says(events []proof.Event) int {
	n := 0
	for _, e := range events {
		if e.Kind == proof.Say {
			n++
		}
	}
	return n
}

// splitSays moves the messages said before the start to the front: they
// are kept whole, in order; the events after them are shrunk.
func splitSays(s *proof.Schedule) ([]proof.Event, *proof.Schedule) {
	var kept, rest []proof.Event
	for _, e := range s.Events {
		if e.Kind == proof.Say && e.At == 0 {
			kept = append(kept, e)
		} else {
			rest = append(rest, e)
		}
	}
	return kept, withEvents(s, append(append([]proof.Event(nil), kept...), rest...))
}

// withEvents copies s with other events.
func withEvents(s *proof.Schedule, events []proof.Event) *proof.Schedule {
	c := *s
	c.Events = events
	return &c
}
