package bandonce

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DrainResult says what a Drain run did.
type DrainResult struct {
	// Drained is true when the run ended because every room was drained,
	// false when ctx (or an error) ended it first.
	Drained bool
	// Rooms is how many rooms the run served.
	Rooms int
	// Stopped lists the rooms that were stopped when the run ended: what
	// waits there waits for play, and a later run answers it.
	Stopped []string
	// Outcomes counts the run's deliveries, by outcome.
	Outcomes map[OutcomeKind]int
	// Waiting lists the messages that were waiting for their next handler
	// attempt when the run ended (see Backoff), by room. Band has them
	// marked failed and serves them again: a later run, or Run, picks
	// them up.
	Waiting []WaitingMessage
}

// WaitingMessage is a message whose handler failed and whose next attempt
// was not yet due.
type WaitingMessage struct {
	RoomID    string
	MessageID string
	// Failures is how many handler failures it has taken.
	Failures int
	// RetryAt is when its next attempt was due.
	RetryAt time.Time
	// Err is its last failure.
	Err error
}

// errDrained ends a Drain run's fetching once every room is drained.
var errDrained = errors.New("bandonce: every room is drained")

// Drain serves the agent's rooms until every one of them is drained, then
// returns: for an agent run from cron, a CI job, a serverless function or
// a batch script, which answers what is waiting and exits. A room is
// drained when its /next has answered empty and it has no handler
// running, no mark owed and no retry pending; a stopped room counts as
// drained, since its work waits for play, and DrainResult.Stopped names
// it. A message whose marks keep failing keeps the run going until it has
// its outcome or ctx ends.
//
// Everything else is as in Run: control signals keep working, ctx bounds
// the whole run (ending it is a clean shutdown: nil, with Drained false),
// and a rejected key or a supersede end it with that error.
func (s *Shell) Drain(ctx context.Context) (DrainResult, error) {
	d := &drainTracker{rooms: map[*room]bool{}, stopped: map[string]bool{}, outcomes: map[OutcomeKind]int{}}
	err := s.serve(ctx, d)
	d.mu.Lock()
	defer d.mu.Unlock()
	res := DrainResult{Drained: err == nil && d.done, Rooms: d.served, Outcomes: maps.Clone(d.outcomes)}
	for id, stopped := range d.stopped {
		if stopped {
			res.Stopped = append(res.Stopped, id)
		}
	}
	slices.Sort(res.Stopped)
	// serve has returned: no worker runs a round, so the rooms' own
	// fields may be read here.
	for r := range d.rooms {
		if w, ok := r.waiting(); ok {
			res.Waiting = append(res.Waiting, w)
		}
	}
	slices.SortFunc(res.Waiting, func(a, b WaitingMessage) int { return strings.Compare(a.RoomID, b.RoomID) })
	if len(res.Waiting) > 0 {
		s.log.Info("bandonce: messages wait for their next attempt; a later run answers them", "messages", len(res.Waiting))
	}
	if res.Drained {
		s.log.Info("bandonce: every room drained", "rooms", res.Rooms, "outcomes", res.Outcomes)
		if len(res.Stopped) > 0 {
			s.log.Info("bandonce: some rooms are stopped; what waits there waits for play", "rooms", res.Stopped)
		}
	}
	return res, err
}

// drainTracker knows which rooms of a Drain run still have work; when
// none has, it ends the run.
type drainTracker struct {
	mu       sync.Mutex
	end      context.CancelCauseFunc // ends fetching; set once start-up is over
	fetch    context.Context         // the run's fetching, to know it is over
	rooms    map[*room]bool          // true: the room has work, or has not looked yet
	stopped  map[string]bool         // by room id: drained because stopped
	outcomes map[OutcomeKind]int
	served   int
	done     bool
}

// add counts a new room as having work until its first empty /next.
func (d *drainTracker) add(r *room) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rooms[r] = true
	d.served++
}

// busy records that the room has work again.
func (d *drainTracker) busy(r *room) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.rooms[r]; ok {
		d.rooms[r] = true
	}
}

// idle records that the room is drained (stopped, if it waits for play),
// and ends the run if every room is.
func (d *drainTracker) idle(r *room, stopped bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.rooms[r]; ok {
		d.rooms[r] = false
		d.stopped[r.id] = stopped
	}
	d.checkLocked()
}

// gone forgets a room the agent left while the run goes on; rooms ending
// with the run keep what they reported.
func (d *drainTracker) gone(r *room) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fetch != nil && d.fetch.Err() != nil {
		return
	}
	delete(d.rooms, r)
	delete(d.stopped, r.id)
	d.checkLocked()
}

// arm starts watching once start-up has added every room it found.
func (d *drainTracker) arm(fetch context.Context, end context.CancelCauseFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fetch, d.end = fetch, end
	d.checkLocked()
}

// checkLocked ends the run when every room is drained, unless something
// else (the caller, a fatal error) has ended it already.
func (d *drainTracker) checkLocked() {
	if d.end == nil || d.done || d.fetch.Err() != nil {
		return
	}
	for _, busy := range d.rooms {
		if busy {
			return
		}
	}
	d.done = true
	d.end(errDrained)
}

func (d *drainTracker) count(kind OutcomeKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes[kind]++
}

// waiting describes the room's held message, if it has one. Only the
// room's worker, or a caller after every round has ended, may call it.
func (r *room) waiting() (WaitingMessage, bool) {
	id, _ := r.ctl.holding()
	if id == "" {
		return WaitingMessage{}, false
	}
	w := WaitingMessage{RoomID: r.id, MessageID: id, RetryAt: r.retryAt}
	if f := r.failures[id]; f != nil {
		w.Failures, w.Err = f.count, f.last
	}
	return w, true
}
