package verify

import (
	"time"
)

// This file holds the spans of the turns: when each delivery an agent
// worked on began and ended, and which one was open when it called the
// external system. (turns.go judges what a turn sent besides its reply.)

// turn is one delivery of a message being worked on: a handler call under
// the Shell adapter, or, for an agent with its own loop, the span from
// External.Started to the processed or failed mark it then sends for the
// message (or to its next Started in the room). The verifier attributes
// side effects to turns, so it can tell which delivery of which message
// performed them, and whether they ran inside it.
type turn struct {
	life      int
	room, msg string
	handler   bool // a handler call under the Shell adapter
	hook      bool // a hook's call about the message, under the Shell adapter
	// start and end are ticks of the engine's order (External.Tick);
	// end is 0 while the turn is open.
	start, end int64
	startAt    time.Time
	// requests is how many requests the agent had completed when it began.
	requests int
	// touched are the effect keys the turn asked about (Performed) or
	// called (Effect); recalled the steps whose recorded result it read,
	// skipping their fns.
	touched, recalled map[string]bool
	// asked: the turn read something from Band, or consulted the Model;
	// ok: its handler returned without an error.
	asked, ok bool
	// inFlight times the turn's requests to Band.
	inFlight []*span
}

// ticker returns the engine's order clock, once a life has started.
func (o *observation) ticker() int64 {
	o.mu.Lock()
	tick := o.tick
	o.mu.Unlock()
	if tick == nil {
		return 0
	}
	return tick()
}

// openTurn records that a turn began.
func (o *observation) openTurn(life int, room, msg string, handler bool) *turn {
	t := &turn{life: life, room: room, msg: msg, handler: handler, start: o.ticker(), startAt: time.Now(), touched: map[string]bool{}, recalled: map[string]bool{}}
	o.mu.Lock()
	defer o.mu.Unlock()
	t.requests = o.completed
	if !handler {
		// A loop works one message of a room at a time: a new turn in the
		// room ends the one before.
		for _, u := range o.turns {
			if !u.handler && !u.hook && u.life == life && u.room == room && u.end == 0 {
				u.end = t.start
			}
		}
	}
	o.turns = append(o.turns, t)
	return t
}

// openHookTurn records that a hook began its call about a message: the
// effects the life performs meanwhile outside a handler are its.
func (o *observation) openHookTurn(life int, room, msg string) *turn {
	t := &turn{life: life, room: room, msg: msg, hook: true, start: o.ticker(), startAt: time.Now(), touched: map[string]bool{}, recalled: map[string]bool{}}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns = append(o.turns, t)
	return t
}

// hookTurn is the life's one open hook turn; nil when none is open, or
// several are (rooms ending turns at once: the verifier cannot tell which).
func (o *observation) hookTurn(life int) *turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	var open *turn
	for _, t := range o.turns {
		if t.hook && t.life == life && t.end == 0 {
			if open != nil {
				return nil
			}
			open = t
		}
	}
	return open
}

// turnStarts lists, in order, how many requests the agent had completed
// when each of its handler or loop turns began.
func (o *observation) turnStarts() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int
	for _, t := range o.turns {
		if !t.hook {
			out = append(out, t.requests)
		}
	}
	return out
}

// closeTurn records that a turn ended.
func (o *observation) closeTurn(t *turn) {
	tick := o.ticker()
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.end == 0 {
		t.end = tick
	}
}

// closeLoopTurns ends the life's open loop turns on msg: it sent the
// message's processed or failed mark.
func (o *observation) closeLoopTurns(life int, msg string) {
	tick := o.ticker()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range o.turns {
		if !t.handler && !t.hook && t.life == life && t.msg == msg && t.end == 0 {
			t.end = tick
		}
	}
}

// loopTurn is the life's one open loop turn, to which an effect called
// outside a handler belongs; nil when none is open, or several are (a loop
// that serves rooms at once: the verifier cannot tell which).
func (o *observation) loopTurn(life int) *turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	var open *turn
	for _, t := range o.turns {
		if !t.handler && !t.hook && t.life == life && t.end == 0 {
			if open != nil {
				return nil
			}
			open = t
		}
	}
	return open
}

// touch records that t asked about or called the effect key.
func (o *observation) touch(t *turn, key string) {
	if t == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t.touched[key] = true
}

// busy reports whether the agent was working on a turn in the room in
// life at tick in a way the engine cannot see: a handler running, or a
// call to the external system in flight. The engine asks it when it
// judges whether an interrupt found a turn in flight.
func (o *observation) busy(life int, room string, tick int64) bool {
	o.mu.Lock()
	for _, t := range o.turns {
		if t.handler && t.life == life && t.room == room && t.start < tick && (t.end == 0 || t.end > tick) {
			o.mu.Unlock()
			return true
		}
	}
	o.mu.Unlock()
	calls, _ := o.world.snapshot()
	for _, c := range calls {
		if c.turn != nil && c.turn.life == life && c.turn.room == room && c.begin < tick && (c.end == 0 || c.end > tick) {
			return true
		}
	}
	return false
}
