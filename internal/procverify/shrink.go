package procverify

import (
	"context"
	"fmt"

	"github.com/band-once/bandonce/internal/ddmin"
)

// shrink delta-debugs a violating schedule (package ddmin): it drops
// events, then makes what is left plainer, for as long as the same rule
// still fails, and returns the smallest schedule found, its result and
// the runs it took. Every trial is a real run of the agent, so a round's
// candidates run in parallel, and the first of them (in order) that still
// fails is kept: a run is not exactly repeatable, so a witness is "a
// schedule that showed the violation again", as the receipt says.
func shrink(ctx context.Context, s *settings, sched *Schedule, res Result) (*Schedule, Result, int) {
	sh := &shrinker{ctx: ctx, s: s, inv: res.Violation.Invariant, best: sched.clone(), res: res}
	ddmin.Rounds(sh.fingerprint, sh.Spent, func() {
		ddmin.DropChunks(sh)
		ddmin.Simplify(sh, simplifications, true)
		if c := compactRooms(sh.best); c != nil {
			sh.tryAll([]*Schedule{c})
		}
		if c := relabel(sh.best); c != nil {
			sh.tryAll([]*Schedule{c})
		}
	})
	return sh.best, sh.res, sh.trials
}

// shrinker is a ddmin.Search over a schedule's events.
type shrinker struct {
	ctx    context.Context
	s      *settings
	inv    Invariant
	best   *Schedule
	res    Result
	trials int
}

func (sh *shrinker) Spent() bool { return sh.trials >= sh.s.ShrinkBudget || sh.ctx.Err() != nil }

func (sh *shrinker) Events() []Event { return sh.best.Events }

func (sh *shrinker) fingerprint() string { return fmt.Sprint(sh.best.Rooms, sh.best.Events) }

// TryAll tries the best schedule with each list of events in turn.
func (sh *shrinker) TryAll(events [][]Event) bool {
	cands := make([]*Schedule, len(events))
	for i, e := range events {
		cands[i] = sh.best.clone()
		cands[i].Events = e
	}
	return sh.tryAll(cands)
}

// tryAll runs the candidates, s.Parallel at a time, and keeps the first
// (in order) whose run still breaks the rule. It reports whether one did.
func (sh *shrinker) tryAll(cands []*Schedule) bool {
	for len(cands) > 0 && !sh.Spent() {
		n := min(len(cands), sh.s.Parallel, sh.s.ShrinkBudget-sh.trials)
		batch := cands[:n]
		cands = cands[n:]
		sh.trials += n
		results := runAll(sh.ctx, sh.s, batch, nil)
		for i, r := range results {
			if r.Violation != nil && r.Violation.Invariant == sh.inv {
				sh.best, sh.res = batch[i], r
				return true
			}
		}
	}
	return false
}

// simplifications each make one field of an event plainer; false when
// there was nothing to simplify.
var simplifications = []func(*Event) bool{
	func(e *Event) bool { return ddmin.Zero(&e.Skip) },
	func(e *Event) bool { return ddmin.Zero(&e.After) },
	func(e *Event) bool { return ddmin.One(&e.Count) },
}

// compactRooms is s with only the rooms its messages are said in,
// renumbered in order; nil when every room is used.
func compactRooms(s *Schedule) *Schedule {
	used := make([]bool, s.Rooms)
	for _, e := range s.Events {
		if e.Kind == Say && e.Room >= 0 && e.Room < s.Rooms {
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
		e := &c.Events[i]
		if e.Room >= 0 && e.Room < len(index) {
			if !used[e.Room] {
				e.Room = 0
			} else {
				e.Room = index[e.Room]
			}
		}
		if e.Kind == Say {
			e.Label = ddmin.Relabel(e.Label, e.Room)
		}
	}
	return c
}

// relabel is s with each room's messages numbered again from 1, in the
// order they are said; nil when they already are.
func relabel(s *Schedule) *Schedule {
	c := s.clone()
	next := map[int]int{}
	changed := false
	for i := range c.Events {
		e := &c.Events[i]
		if e.Kind != Say {
			continue
		}
		next[e.Room]++
		if label := fmt.Sprintf("r%dm%d", e.Room+1, next[e.Room]); label != e.Label {
			e.Label, changed = label, true
		}
	}
	if !changed {
		return nil
	}
	return c
}
