package bandonce

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// scheduler runs the rooms' rounds, at most MaxConcurrentRooms at once: on
// a few workers that live as long as the run (their stacks grown once),
// and beyond them each on a goroutine of its own that ends with the round.
// A room that waits costs no goroutine: it sits in a heap until its next
// look is due, or until a push wakes it. The looks that only
// guard against a lost push (resyncs, polls without a socket, a stopped
// room's periodic probe) share one idle budget, at most one every
// IdleRequestInterval for the whole shell, the room longest due first; so
// an agent in ten thousand quiet rooms stays quiet.
//
// A round talks to Band before its handler (/next, the processing mark, a
// guard read) and after it (the post, the processed mark), and waits while
// the handler runs. The rounds talking to Band at once are bounded by the
// request budget too, slotsPerRequest per request in flight: a round holds
// a slot but while its handler runs. The other rooms wait in the ready
// queue, where a room costs no goroutine, and a handler that returned
// waits for a slot before it builds a request, rather than thousands of
// goroutines each queued in the limiter with a request built: so a
// backlog in ten thousand rooms costs little more memory than the handlers
// running, and their requests go in the order they came.
//
// One goroutine, the dispatcher, owns every room's place in the queues;
// wake is the only way in from outside and never blocks.
type scheduler struct {
	s         *Shell
	limit     int // rounds at once: MaxConcurrentRooms
	idleEvery time.Duration
	// slots holds a token for each round talking to Band; the
	// dispatcher starts no round while it is full.
	slots chan struct{}

	mu    sync.Mutex
	woken []*room       // wake-ups for the dispatcher to take in
	again []*room       // catch-ups: a look that begins after the wake-up
	poll  bool          // the socket went down: bring the budgeted looks in (pollSoon)
	kick  chan struct{} // buffered(1): woken has something, or a slot is free for a room waiting
	// wantSlot says that a ready room waits for a slot: the round that
	// gives one back then kicks the dispatcher. Otherwise it does not, so
	// a room alone does not wake the dispatcher as its handler starts.
	wantSlot bool

	// resting holds the workers waiting for work, each by the channel it
	// takes its next round from. The dispatcher's own, and a stack: the
	// worker that rested last is handed the next round, so a run of a
	// few rounds reuses one worker's grown stack rather than growing a
	// stack afresh on every worker in turn.
	resting []chan *room
	workers int            // how many may live as long as the run: as many as slots
	started int            // how many have started
	pool    sync.WaitGroup // the workers
	results chan roundDone // rounds to dispatcher

	// The dispatcher's own.
	ready    []*room   // FIFO of rooms to run now
	timers   roomQueue // rooms waiting for their due time
	idle     roomQueue // rooms whose budgeted look is due, waiting for the budget
	nextIdle time.Time // when the idle budget allows the next look
	busy     int       // rounds running
}

// Where a room is in the scheduler.
type schedState int

const (
	schedNew     schedState = iota // added, not taken in yet
	schedReady                     // in ready
	schedRunning                   // its round runs
	schedWaiting                   // in timers
	schedIdle                      // in idle
	schedDone                      // left the scheduler for good
)

// roomSched is a room's place in the scheduler, owned by the dispatcher.
type roomSched struct {
	state    schedState
	due      time.Time
	budgeted bool // the look that is due only guards against a lost push
	rewake   bool // woken while running: look again at once
	index    int  // in timers or idle
}

// roundDone is how a room's round ended and what it asks for next.
type roundDone struct {
	r        *room
	gone     bool          // the room is no longer served
	again    bool          // look again at once
	wait     time.Duration // otherwise: the next look after this long
	budgeted bool          // and that look only guards against a lost push
	worker   chan *room    // the worker the round ran on, now idle again; nil for its own goroutine
}

// slotsPerRequest is how many rounds may talk to Band at once per request
// in flight: one, so that while Band does not throttle, a request never
// queues in the limiter, whose queue costs a timer and a hand-off per
// start (a handler's own requests aside).
const slotsPerRequest = 1

func newScheduler(s *Shell) *scheduler {
	return &scheduler{
		s: s, limit: s.cfg.MaxConcurrentRooms, idleEvery: s.cfg.IdleRequestInterval,
		slots:   make(chan struct{}, slotsPerRequest*s.cfg.MaxRequestsInFlight),
		kick:    make(chan struct{}, 1),
		results: make(chan roundDone),
	}
}

// wake asks for a look at the room now (a new room, a push, a play, a
// leave). It never blocks.
func (q *scheduler) wake(r *room) {
	q.mu.Lock()
	q.woken = append(q.woken, r)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// catchUp asks for a look at the room that begins after this call (a
// topic's join was answered: a message said before it was pushed to
// nobody). Unlike wake it does not merge with a look that is due but has
// not begun, whose start the caller cannot order against its own: the
// room always looks once more after its current or next round, so the
// number of looks does not depend on which goroutine came first. It never
// blocks.
func (q *scheduler) catchUp(r *room) {
	q.mu.Lock()
	q.again = append(q.again, r)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// pollSoon brings every room's look that only guards against a lost push
// and is due later than the poll interval in to it: the socket is down,
// so no push will wake those rooms, and an idle room polls. It never
// blocks.
func (q *scheduler) pollSoon() {
	q.mu.Lock()
	q.poll = true
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// run dispatches until fetch ends; it returns once every round has
// ended. hard bounds the handlers.
func (q *scheduler) run(fetch, hard context.Context) {
	q.workers = min(q.limit, cap(q.slots))
	q.resting = make([]chan *room, 0, q.workers)
	q.dispatch(fetch, hard)
	for ; q.busy > 0; q.busy-- {
		done := <-q.results // Run is ending: its rooms are let go by the shell
		// Its slot, for a round still to end whose handler returned.
		done.r.handlerStarts()
	}
	q.pool.Wait()
}

// startWorker starts a worker that lives as long as the run, with r as
// its first round. Workers start as rounds need them, so a shell in a
// few rooms starts a few.
func (q *scheduler) startWorker(fetch, hard context.Context, r *room) {
	q.started++
	in := make(chan *room)
	q.pool.Go(func() {
		for {
			done := r.round(hard)
			done.worker = in
			q.results <- done
			select {
			case r = <-in:
			case <-fetch.Done():
				return
			}
		}
	})
}

func (q *scheduler) dispatch(fetch, hard context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.takeIn()
		now := time.Now()
		for len(q.timers) > 0 && !now.Before(q.timers[0].sched.due) {
			r := heap.Pop(&q.timers).(*room)
			if r.sched.budgeted {
				q.toIdle(r)
			} else {
				q.toReady(r)
			}
		}
		if len(q.idle) > 0 && !now.Before(q.nextIdle) {
			r := heap.Pop(&q.idle).(*room)
			q.toReady(r)
			q.nextIdle = now.Add(q.idleEvery)
		}

		for len(q.ready) > 0 && q.busy < q.limit && q.takeSlot() {
			r := q.ready[0]
			q.ready[0] = nil
			q.ready = q.ready[1:]
			r.sched.state = schedRunning
			q.busy++
			r.slot = true
			if n := len(q.resting); n > 0 {
				// This worker is waiting, or about to, since its last
				// round's end was taken in.
				w := q.resting[n-1]
				q.resting = q.resting[:n-1]
				select {
				case w <- r:
				case <-fetch.Done():
					q.resting = append(q.resting, w)
					q.busy--          // never ran; Run is ending and lets the room go
					r.handlerStarts() // the slot taken for it
					return
				}
			} else if q.started < q.workers {
				q.startWorker(fetch, hard, r)
			} else {
				go func() { q.results <- r.round(hard) }()
			}
		}
		if next, ok := q.nextDue(); ok {
			timer.Reset(max(next.Sub(now), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case done := <-q.results:
			q.busy--
			if done.worker != nil {
				q.resting = append(q.resting, done.worker)
			}
			done.r.handlerStarts() // the round's slot, if it still holds it
			q.place(done, now)
		case <-q.kick:
		case <-timer.C:
		case <-fetch.Done():
			return
		}
	}
}

// takeSlot takes a slot for a new round if one is free. When none is, it
// asks the next round that gives one back to kick the dispatcher, and
// looks once more under the same lock: a slot given back before the ask
// is taken now, one given back after it kicks.
func (q *scheduler) takeSlot() bool {
	select {
	case q.slots <- struct{}{}:
		return true
	default:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case q.slots <- struct{}{}:
		return true
	default:
		q.wantSlot = true
		return false
	}
}

// handlerStarts gives back the slot of the round the room runs, if it
// holds it, and lets the dispatcher start another round if a room waits
// for one (see takeSlot). The round calls it as its handler starts; the
// dispatcher, as the round ends.
func (r *room) handlerStarts() {
	if !r.slot {
		return
	}
	r.slot = false
	q := r.q
	q.mu.Lock()
	<-q.slots
	kick := q.wantSlot
	q.wantSlot = false
	q.mu.Unlock()
	if kick {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

// handlerEnds waits for a slot before the round talks to Band again.
func (r *room) handlerEnds() {
	r.q.slots <- struct{}{}
	r.slot = true
}

// nextDue is when the dispatcher must look at its queues again.
func (q *scheduler) nextDue() (time.Time, bool) {
	var next time.Time
	ok := false
	if len(q.timers) > 0 {
		next, ok = q.timers[0].sched.due, true
	}
	if len(q.idle) > 0 && (!ok || q.nextIdle.Before(next)) {
		next, ok = q.nextIdle, true
	}
	return next, ok
}

// takeIn moves the woken rooms to the ready queue, or marks a running one
// to run again.
func (q *scheduler) takeIn() {
	q.mu.Lock()
	woken, again, poll := q.woken, q.again, q.poll
	q.woken, q.again, q.poll = nil, nil, false
	q.mu.Unlock()
	if poll {
		by := time.Now().Add(q.s.cfg.PollInterval)
		for _, r := range q.timers {
			if r.sched.budgeted && r.sched.due.After(by) {
				r.sched.due = by
			}
		}
		heap.Init(&q.timers)
	}
	for _, r := range again {
		switch r.sched.state {
		case schedNew, schedReady, schedRunning:
			// Its round is due or running: one more after it.
			r.sched.rewake = true
		}
	}
	woken = append(woken, again...)
	for _, r := range woken {
		switch r.sched.state {
		case schedRunning:
			r.sched.rewake = true
		case schedWaiting:
			heap.Remove(&q.timers, r.sched.index)
			q.toReady(r)
		case schedIdle:
			heap.Remove(&q.idle, r.sched.index)
			q.toReady(r)
		case schedNew:
			q.toReady(r)
		}
	}
}

// place places a room after its round.
func (q *scheduler) place(d roundDone, now time.Time) {
	r := d.r
	rewake := r.sched.rewake
	r.sched.rewake = false
	switch {
	case d.gone:
		r.sched.state = schedDone
		q.s.roomEnded(r)
	case d.again || rewake:
		q.toReady(r)
	default:
		r.sched.state, r.sched.due, r.sched.budgeted = schedWaiting, now.Add(d.wait), d.budgeted
		heap.Push(&q.timers, r)
	}
}

func (q *scheduler) toReady(r *room) {
	r.sched.state = schedReady
	q.ready = append(q.ready, r)
}

func (q *scheduler) toIdle(r *room) {
	r.sched.state = schedIdle
	heap.Push(&q.idle, r)
}

// roomQueue is a heap of rooms by due time, then id: a tie never depends
// on the order in which rounds happened to end.
type roomQueue []*room

func (h roomQueue) Len() int { return len(h) }
func (h roomQueue) Less(i, j int) bool {
	if a, b := h[i].sched.due, h[j].sched.due; !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].id < h[j].id
}
func (h roomQueue) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sched.index, h[j].sched.index = i, j
}
func (h *roomQueue) Push(x any) {
	r := x.(*room)
	r.sched.index = len(*h)
	*h = append(*h, r)
}
func (h *roomQueue) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.sched.index = -1
	return r
}
