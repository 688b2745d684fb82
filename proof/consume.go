package proof

import (
	"math"

	"github.com/band-once/bandonce/fakeband"
)

// interruptsConsume judges InterruptConsumes: a message whose turn an
// interrupt reached is consumed by the shell that heard it. That shell
// must not run its handler again, post its reply or mark it failed: each
// is the message left for replay. A later life may (a crash forgets the
// interrupt), and so may a replica's later lease term, which runs a new
// shell (a lease lost before the mark could land forgets it too), and so
// may other messages that share its key.
func (t *truth) interruptsConsume(v *judgement) {
	for _, c := range t.s.controls {
		if c.Kind != Interrupt {
			continue
		}
		a, ok := t.s.arrivals.get(c.CorrelationID)
		if !ok {
			continue
		}
		for room := range t.s.rooms {
			if c.Room >= 0 && c.Room != room {
				continue
			}
			st := t.turnAt(room, a)
			if st == nil {
				continue
			}
			v.Check(InterruptConsumes)
			if why := t.leftForReplay(room, st, a); why != "" {
				v.Fail(InterruptConsumes, "%s's turn was interrupted, and the same life then %s: an interrupted message must be consumed, not left for replay",
					t.labelOf(st.MessageID), why)
			}
		}
	}
}

// turnAt returns the handler start of the room's turn in flight in life
// a.life when the push arrived, or nil when none was: the interrupt had
// nothing to consume. A turn is in flight when its handler had started,
// its fate was not decided yet (no reply posted, no processed or failed
// mark sent, no stop heard for the room since, the room's next message
// not asked for), and the agent was busy with it: a request of the turn was outstanding, the handler was still
// running, or Options.Busy says so. A turn that ended quietly (a read
// failed and the agent let the message come back later) is not in flight.
func (t *truth) turnAt(room int, a arrival) *HandlerStart {
	roomID := t.s.rooms[room].ID
	var st *HandlerStart
	for i := range t.starts {
		h := &t.starts[i]
		if h.Life == a.life && h.Room == roomID && h.Tick < a.tick && (st == nil || h.Tick > st.Tick) {
			st = h
		}
	}
	if st == nil || t.termEnd(a.life, st.Tick) < a.tick {
		return nil // the shell that started it is gone: the new term's started nothing
	}
	key := t.keyOf[st.MessageID]
	busy := st.Ended > a.tick // the handler reported it returned after the push
	for _, rq := range t.turnReqs {
		if rq.Life != a.life || rq.Room != roomID || rq.Parked < st.Tick || rq.Parked > a.tick {
			continue
		}
		switch {
		case rq.Message == st.MessageID && (rq.Kind == fakeband.EndpointProcessed || rq.Kind == fakeband.EndpointFailed):
			return nil // its fate was decided
		case rq.Kind == fakeband.EndpointNext || (rq.Kind == fakeband.EndpointProcessing && rq.Message != st.MessageID):
			return nil // the agent had moved on to the room's next message
		}
		busy = busy || rq.Answered == 0 || rq.Answered > a.tick
	}
	for _, sr := range t.sends {
		if sr.Life == a.life && sr.Room == roomID && sr.Key == key && sr.ParkedTick > st.Tick && sr.ParkedTick < a.tick {
			return nil // its reply was on its way: an interrupt retracts nothing posted
		}
	}
	for _, c := range t.s.controls {
		if c.Kind != Stop || c.Room != room {
			continue
		}
		if s, ok := t.s.arrivals.get(c.CorrelationID); ok && s.life == a.life && s.tick > st.Tick && s.tick < a.tick {
			return nil // a stop ended the turn and left the message for replay
		}
	}
	if !busy && (t.s.opts.Busy == nil || !t.s.opts.Busy(a.life, roomID, a.tick)) {
		return nil
	}
	return st
}

// leftForReplay says how the life that heard the interrupt went on with
// the message, or "" if it did not. A stop for the room that reached the
// life after the interrupt overrides it (the last signal wins, and a stop
// leaves the message for replay), so what follows that stop is fair, and
// so is what a later lease term's shell does.
func (t *truth) leftForReplay(room int, st *HandlerStart, a arrival) string {
	until := t.termEnd(a.life, a.tick)
	for _, c := range t.s.controls {
		if c.Kind != Stop || c.Room != room {
			continue
		}
		if s, ok := t.s.arrivals.get(c.CorrelationID); ok && s.life == a.life && s.tick > a.tick && s.tick < until {
			until = s.tick
		}
	}
	after := func(tick int64) bool { return tick > a.tick && tick < until }
	for _, h := range t.starts {
		if h.Life == a.life && h.MessageID == st.MessageID && after(h.Tick) {
			return "ran its handler again"
		}
	}
	for _, mk := range t.turnReqs {
		if mk.Life == a.life && mk.Message == st.MessageID && mk.Kind == fakeband.EndpointFailed && after(mk.Parked) {
			return "marked it failed"
		}
	}
	key := t.keyOf[st.MessageID]
	if len(t.messagesWithKey(room, key)) != 1 {
		return "" // a reply with its key may answer another message
	}
	roomID := t.s.rooms[room].ID
	for _, sr := range t.sends {
		if sr.Life == a.life && sr.Room == roomID && sr.Key == key && after(sr.ParkedTick) {
			return "posted its reply"
		}
	}
	return ""
}

// termEnd is when the shell of life n that ran at tick gave way to the
// shell of a new lease term (life.termEnd); with one shell per life, never.
func (t *truth) termEnd(n int, tick int64) int64 {
	for _, l := range t.s.allLives {
		if l.n == n {
			return l.termEnd(tick)
		}
	}
	return math.MaxInt64
}

// superseded judges SupersedeStops for every life the supersede reached:
// it starts no new work (the driver judges that it stops in time).
func (t *truth) superseded(v *judgement) {
	for _, l := range t.s.allLives {
		if heard, _ := l.supersedeHeard(); !heard {
			continue
		}
		v.Check(SupersedeStops)
		if ep := l.workAfterSupersede(); ep != "" {
			what := "posted a message"
			switch ep {
			case fakeband.EndpointEvent:
				what = "sent an event"
			case fakeband.EndpointSocket:
				what = "opened a socket again"
			}
			v.Fail(SupersedeStops, "the agent kept working after it was superseded: it %s after the supersede reached it (life %d)", what, l.n)
			continue
		}
		for _, h := range t.starts {
			if h.Life == l.n && h.Tick > l.supersedeTick() {
				v.Fail(SupersedeStops, "the agent kept working after it was superseded: it started a handler on %s after the supersede reached it (life %d)", t.labelOf(h.MessageID), l.n)
				break
			}
		}
	}
}
