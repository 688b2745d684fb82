// Package ddmin is the delta-debugging shrinker the two kill-storm
// engines share: package proof, which re-runs a schedule in virtual time,
// and internal/procverify, which re-runs it against a real process. Each
// engine says how a candidate is tried (Search); ddmin says which
// candidates to try and in what order, so a witness is shrunk the same way
// whichever engine found it.
package ddmin

import "fmt"

// Search is a shrinking in progress over a failing list of events.
type Search[E any] interface {
	// Events is the smallest list found so far that still fails.
	Events() []E
	// TryAll runs the candidates in order and keeps the first that still
	// fails the same way, reporting whether one did. It may run them
	// several at a time, and runs none once the budget is spent.
	TryAll(candidates [][]E) bool
	// Spent reports whether the trial budget is used up.
	Spent() bool
}

// DropChunks drops chunks of events: the list in halves, then quarters,
// and so on down to single events, going back to bigger chunks after each
// drop that kept the failure. It returns when no single event can go or
// the budget is spent; the list left is then 1-minimal within the budget.
func DropChunks[E any](s Search[E]) {
	n := 2
	for len(s.Events()) > 0 && !s.Spent() {
		events := s.Events()
		n = min(n, len(events))
		size := (len(events) + n - 1) / n
		var cands [][]E
		for start := 0; start < len(events); start += size {
			cands = append(cands, append(append([]E(nil), events[:start]...), events[min(start+size, len(events)):]...))
		}
		if s.TryAll(cands) {
			n = max(n-1, 2)
			continue
		}
		if size == 1 {
			return
		}
		n = min(n*2, len(events))
	}
}

// Simplify makes each event plainer, one field at a time: for each event
// in turn, a candidate per plainer that changes it (a plainer reports
// whether it did). Together offers an event's candidates in one TryAll,
// all built from the same list, for a search that runs them at once;
// otherwise they are offered one at a time, each built on the list the
// last trial kept.
func Simplify[E any](s Search[E], plainers []func(*E) bool, together bool) {
	for i := 0; i < len(s.Events()) && !s.Spent(); i++ {
		var cands [][]E
		for _, plainer := range plainers {
			c := append([]E(nil), s.Events()...)
			if !plainer(&c[i]) {
				continue
			}
			if together {
				cands = append(cands, c)
			} else {
				s.TryAll([][]E{c})
			}
		}
		if together {
			s.TryAll(cands)
		}
	}
}

// Zero sets *p to its zero value and reports whether that changed it: a
// plainer for a field whose zero is its plainest value.
func Zero[T comparable](p *T) bool {
	var z T
	if *p == z {
		return false
	}
	*p = z
	return true
}

// One sets a count above one to one and reports whether that changed it:
// a plainer for a count, such as a burst's length.
func One(p *int) bool {
	if *p <= 1 {
		return false
	}
	*p = 1
	return true
}

// Rounds runs round again until a round leaves the fingerprint of the
// smallest schedule unchanged or spent says the budget is used up: one
// pass can make another productive (a plainer event may become droppable).
func Rounds(fingerprint func() string, spent func() bool, round func()) {
	for {
		before := fingerprint()
		round()
		if fingerprint() == before || spent() {
			return
		}
	}
}

// RoomIndex renumbers rooms so that only the used ones remain, in order:
// index[r] is room r's new number (the next used room's for an unused
// one), n how many remain.
func RoomIndex(used []bool) (index []int, n int) {
	index = make([]int, len(used))
	for r, u := range used {
		index[r] = n
		if u {
			n++
		}
	}
	return index, n
}

// Relabel renames a message label "rXmY" (room X, message Y) to room's
// new number, counted from 0; another label is returned as it is.
func Relabel(label string, room int) string {
	var r, m int
	if _, err := fmt.Sscanf(label, "r%dm%d", &r, &m); err != nil {
		return label
	}
	return fmt.Sprintf("r%dm%d", room+1, m)
}
