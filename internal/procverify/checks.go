package procverify

import (
	"fmt"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/seedrand"
)

// Check is one family of schedules, named on the command line.
type Check struct {
	// Name is what -check takes; Doc says in one line what its
	// schedules do.
	Name, Doc string
	// Socket: the check needs the agent's socket (control signals,
	// socket faults). An agent declared without one skips it, and the
	// receipt says so.
	Socket bool
	// Replicas: the check acts on a holder among replicas (pauses,
	// hand-overs); it runs only with Config.Replicas.
	Replicas bool
	build    func(b *builder) *Schedule
}

// Checks is every check, in the order they run.
var Checks = []Check{
	{Name: "kill-before-post", Doc: "SIGKILL the agent as it sends a reply; the reply never lands",
		build: func(b *builder) *Schedule { return b.faulted(b.kills(KillBefore, fakeband.EndpointPost)) }},
	{Name: "kill-after-post", Doc: "SIGKILL the agent as it sends a reply; the reply lands, the agent never hears",
		build: func(b *builder) *Schedule { return b.faulted(b.kills(KillAfter, fakeband.EndpointPost)) }},
	{Name: "kill-anywhere", Doc: "SIGKILL the agent at any other request of a message's lifecycle",
		build: func(b *builder) *Schedule { return b.faulted(b.killsAnywhere) }},
	{Name: "lost-ack", Doc: "lose, fail or SIGKILL the processed mark",
		build: func(b *builder) *Schedule { return b.faulted(b.lostAcks) }},
	{Name: "lost-reply", Doc: "lose or fail the answer to a reply while the agent lives",
		build: func(b *builder) *Schedule { return b.faulted(b.lostReplies) }},
	{Name: "duplicate-delivery", Doc: "serve messages again: a stale /next, lost claims and reads",
		build: func(b *builder) *Schedule { return b.faulted(b.duplicates) }},
	{Name: "transient-errors", Doc: "429s with and without Retry-After, 5xx bursts and latency",
		build: func(b *builder) *Schedule { return b.faulted(b.transients) }},
	{Name: "socket-drops", Doc: "drop the agent's socket while messages arrive", Socket: true,
		build: func(b *builder) *Schedule { return b.faulted(b.socketDrops) }},
	{Name: "interrupt", Doc: "interrupt the turn in flight, at a request boundary and at random", Socket: true,
		build: func(b *builder) *Schedule { return b.controlled(Interrupt) }},
	{Name: "stop-and-play", Doc: "stop the turn in flight, then play (some plays sent while the socket is down)", Socket: true,
		build: func(b *builder) *Schedule { return b.controlled(Stop) }},
	{Name: "supersede", Doc: "another connection takes over: the process must send nothing more and exit (non-zero with -supersede-exit)", Socket: true,
		build: func(b *builder) *Schedule { return b.supersede() }},
	{Name: "pause-holder", Doc: "with -replicas: SIGSTOP the holder mid-turn until another replica takes over, then SIGCONT it", Replicas: true,
		build: func(b *builder) *Schedule { return b.faulted(b.pauses) }},
	{Name: "hand-over", Doc: "with -replicas: SIGTERM the holder mid-turn, as a deploy does; another replica takes over", Replicas: true,
		build: func(b *builder) *Schedule { return b.faulted(b.handOvers) }},
	{Name: "storm", Doc: "every fault and signal above, mixed (with -replicas, pauses and hand-overs too)",
		build: func(b *builder) *Schedule { return b.storm() }},
}

// CheckNamed returns the check called name.
func CheckNamed(name string) (Check, bool) {
	for _, c := range Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Build draws the check's schedule for seed. The same seed always gives
// the same schedule; socket says whether the agent has a socket.
func (c Check) Build(seed int64, socket bool) *Schedule {
	return c.buildFor(seed, socket, false)
}

// buildFor is Build for an agent run as replicas or not: a replicas
// storm also draws pauses and hand-overs of the holder.
func (c Check) buildFor(seed int64, socket, replicas bool) *Schedule {
	b := newBuilder(seed, c.Name, socket)
	b.replicas = replicas
	s := c.build(b)
	s.Check, s.Seed = c.Name, seed
	return s
}

// builder draws one schedule from a seed.
type builder struct {
	r        seedrand.Rand
	socket   bool
	replicas bool
}

func newBuilder(seed int64, check string, socket bool) *builder {
	return &builder{r: seedrand.Named(seed, check), socket: socket}
}

// says draws the humans' messages, lo..hi per room: the first of each
// room is waiting when the agent starts, the others come now and then
// while it works.
func (b *builder) says(rooms, lo, hi int) (waiting, later []Event) {
	for room := range rooms {
		for i := range b.r.Between(lo, hi) {
			e := Event{Kind: Say, Room: room, Label: fmt.Sprintf("r%dm%d", room+1, i+1)}
			if i > 0 && b.r.IntN(2) == 0 {
				e.After = b.r.Duration(20*time.Millisecond, 400*time.Millisecond)
				later = append(later, e)
				continue
			}
			waiting = append(waiting, e)
		}
	}
	return waiting, later
}

// weave mixes the later messages and the faults in a random order that
// keeps each list's own order, after the waiting messages.
func (b *builder) weave(waiting, later, faults []Event) []Event {
	out := append([]Event(nil), waiting...)
	for len(later)+len(faults) > 0 {
		if len(faults) == 0 || (len(later) > 0 && b.r.IntN(len(later)+len(faults)) < len(later)) {
			out, later = append(out, later[0]), later[1:]
		} else {
			out, faults = append(out, faults[0]), faults[1:]
		}
	}
	return out
}

// schedule assembles the events, numbering each room's messages in the
// order they are said.
func (b *builder) schedule(rooms int, events []Event) *Schedule {
	s := &Schedule{Rooms: rooms, Events: events}
	if r := relabel(s); r != nil {
		return r
	}
	return s
}

// faulted is the common shape: 1–2 rooms, 1–3 messages each, and the
// faults draw makes.
func (b *builder) faulted(draw func() []Event) *Schedule {
	rooms := b.r.Between(1, 2)
	waiting, later := b.says(rooms, 1, 3)
	return b.schedule(rooms, b.weave(waiting, later, draw()))
}

// skip draws how many matching requests a request-bound event lets pass:
// mostly none, so that it fires in short schedules too.
func (b *builder) skip() int { return []int{0, 0, 0, 1, 1, 2}[b.r.IntN(6)] }

func (b *builder) kills(kind Kind, ep fakeband.Endpoint) func() []Event {
	return func() []Event {
		var out []Event
		for range b.r.Between(1, 2) {
			out = append(out, Event{Kind: kind, Endpoint: ep, Skip: b.skip()})
		}
		return out
	}
}

var lifecycleEndpoints = []fakeband.Endpoint{
	fakeband.EndpointNext, fakeband.EndpointProcessing, fakeband.EndpointContext, fakeband.EndpointProcessed,
}

func (b *builder) killsAnywhere() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		kind := []Kind{KillBefore, KillAfter}[b.r.IntN(2)]
		out = append(out, Event{Kind: kind, Endpoint: lifecycleEndpoints[b.r.IntN(len(lifecycleEndpoints))], Skip: b.skip()})
	}
	return out
}

func (b *builder) lostAcks() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		e := Event{Endpoint: fakeband.EndpointProcessed, Skip: b.skip()}
		switch b.r.IntN(4) {
		case 0:
			e.Kind = LoseResponse
		case 1:
			e.Kind = KillAfter
		case 2:
			e.Kind = KillBefore
		default:
			e.Kind, e.Status, e.Count = ServerError, 500+b.r.IntN(5), b.r.Between(1, 3)
		}
		out = append(out, e)
	}
	return out
}

func (b *builder) lostReplies() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		e := Event{Kind: LoseResponse, Endpoint: fakeband.EndpointPost, Skip: b.skip()}
		switch b.r.IntN(5) {
		case 0:
			e.Kind, e.Status, e.Count = ServerError, 502+b.r.IntN(3), b.r.Between(1, 2)
		case 1:
			e.Kind, e.Status = Throttle, 429
		case 2:
			out = append(out, b.lateReply(false)...)
			continue
		}
		out = append(out, e)
	}
	return out
}

// lateReply draws a reply POST that Band applies late: held past the
// agent's request timeout, so that it gave up on it, or, with kill, held
// while the agent is killed, so that it lands in the next life.
func (b *builder) lateReply(kill bool) []Event {
	e := Event{Kind: ApplyLate, Endpoint: fakeband.EndpointPost, Skip: b.skip()}
	if !kill {
		e.Delay = b.r.Duration(AgentRequestTimeout+200*time.Millisecond, LateBound)
		return []Event{e}
	}
	e.Delay = b.r.Duration(200*time.Millisecond, LateBound)
	return []Event{e, {Kind: []Kind{KillBefore, KillAfter}[b.r.IntN(2)]}}
}

func (b *builder) duplicates() []Event {
	var out []Event
	for range b.r.Between(1, 3) {
		e := Event{Skip: b.skip()}
		switch b.r.IntN(4) {
		case 0:
			e.Kind, e.Endpoint = StaleNext, fakeband.EndpointNext
		case 1:
			e.Kind, e.Endpoint = LoseResponse, fakeband.EndpointProcessing
		case 2:
			e.Kind, e.Endpoint = LoseResponse, fakeband.EndpointNext
		default:
			e.Kind, e.Endpoint = KillAfter, fakeband.EndpointProcessing
		}
		out = append(out, e)
	}
	return out
}

var anyEndpoint = []fakeband.Endpoint{"", fakeband.EndpointMe, fakeband.EndpointChats, fakeband.EndpointNext,
	fakeband.EndpointProcessing, fakeband.EndpointContext, fakeband.EndpointPost, fakeband.EndpointProcessed}

func (b *builder) transients() []Event {
	var out []Event
	for range b.r.Between(1, 4) {
		out = append(out, b.transient())
	}
	return out
}

func (b *builder) transient() Event {
	e := Event{Endpoint: anyEndpoint[b.r.IntN(len(anyEndpoint))], Skip: b.skip()}
	switch b.r.IntN(3) {
	case 0:
		e.Kind, e.Status = Throttle, 429
		if b.r.IntN(2) == 0 {
			e.RetryAfter = "1"
		}
	case 1:
		e.Kind, e.Status, e.Count = ServerError, 500+b.r.IntN(5), b.r.Between(1, 3)
	default:
		e.Kind, e.Delay = Latency, b.r.Duration(50*time.Millisecond, 1500*time.Millisecond)
	}
	return e
}

func (b *builder) socketDrops() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		out = append(out, Event{Kind: DropSocket, After: b.r.Duration(0, 300*time.Millisecond)})
	}
	return out
}

// heldAt is where a signal is sent with the request's answer held: after
// the agent claimed the message, or while it reads the room, so that the
// signal provably reaches it before it can send the reply.
// The claim is held twice as often: every agent claims, not every agent
// reads the room.
var heldAt = []fakeband.Endpoint{fakeband.EndpointProcessing, fakeband.EndpointProcessing, fakeband.EndpointContext}

// signal draws an interrupt or a stop: mostly held at a request boundary,
// sometimes timed, when it only excuses what it may have cut short.
func (b *builder) signal(kind Kind, rooms, waiting int) Event {
	if b.r.IntN(4) > 0 {
		// Held at one of the claims of the messages in hand.
		return Event{Kind: kind, Endpoint: heldAt[b.r.IntN(len(heldAt))], Skip: b.r.IntN(max(waiting, 1))}
	}
	return Event{Kind: kind, Room: b.r.IntN(rooms), After: b.r.Duration(0, 100*time.Millisecond)}
}

// play follows a stop: the room it resumes is the stop's (every room for
// a held stop, whose room is only known when it fires), sometimes after a
// socket drop, so the play's push finds no connection.
func (b *builder) plays(rooms int) []Event {
	var out []Event
	if b.r.IntN(4) == 0 {
		out = append(out, Event{Kind: DropSocket, After: b.r.Duration(50*time.Millisecond, 300*time.Millisecond)})
	}
	for room := range rooms {
		out = append(out, Event{Kind: Play, Room: room, After: b.r.Duration(100*time.Millisecond, 800*time.Millisecond)})
	}
	return out
}

// controlled is one room or two, a few messages, and a signal in the
// middle of one of them (a stop followed by its play).
func (b *builder) controlled(kind Kind) *Schedule {
	rooms := b.r.Between(1, 2)
	waiting, later := b.says(rooms, 1, 3)
	var plays []Event
	if kind == Stop {
		plays = b.plays(rooms)
	}
	// The signal comes first, while the waiting messages are in hand;
	// messages said later (while the room is stopped, perhaps) and the
	// plays follow.
	events := append(waiting, b.signal(kind, rooms, len(waiting)))
	return b.schedule(rooms, b.weave(events, later, plays))
}

func (b *builder) supersede() *Schedule {
	rooms := b.r.Between(1, 2)
	waiting, later := b.says(rooms, 1, 3)
	faults := []Event{{Kind: Supersede, After: b.r.Duration(0, 500*time.Millisecond)}}
	return b.schedule(rooms, b.weave(waiting, later, faults))
}

// turnEndpoints are the requests of a turn a pause or a hand-over
// lands on: the claim, the read of the room, the reply, the mark.
var turnEndpoints = []fakeband.Endpoint{fakeband.EndpointProcessing, fakeband.EndpointProcessing,
	fakeband.EndpointContext, fakeband.EndpointPost, fakeband.EndpointProcessed}

func (b *builder) pause() Event {
	return Event{Kind: Pause, Endpoint: turnEndpoints[b.r.IntN(len(turnEndpoints))], Skip: b.skip(),
		Delay: b.r.Duration(0, time.Second)}
}

func (b *builder) pauses() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		out = append(out, b.pause())
	}
	return out
}

func (b *builder) handOver() Event {
	return Event{Kind: HandOver, Endpoint: turnEndpoints[b.r.IntN(len(turnEndpoints))], Skip: b.skip()}
}

func (b *builder) handOvers() []Event {
	var out []Event
	for range b.r.Between(1, 2) {
		out = append(out, b.handOver())
	}
	return out
}

// storm mixes everything the agent's capabilities allow.
func (b *builder) storm() *Schedule {
	rooms := b.r.Between(1, 2)
	waiting, later := b.says(rooms, 1, 4)
	var faults []Event
	for range b.r.Between(2, 5) {
		x := b.r.IntN(100)
		if !b.socket && x >= 60 {
			x %= 60
		}
		switch {
		case x < 10:
			faults = append(faults, Event{Kind: []Kind{KillBefore, KillAfter}[b.r.IntN(2)], Endpoint: fakeband.EndpointPost, Skip: b.skip()})
		case x < 15:
			faults = append(faults, b.lateReply(b.r.IntN(3) > 0)...)
		case x < 25:
			faults = append(faults, b.killsAnywhere()[0])
		case x < 40:
			faults = append(faults, b.transient())
		case x < 50:
			faults = append(faults, b.lostReplies()[0])
		case x < 60:
			faults = append(faults, b.duplicates()[0])
		case x < 70:
			faults = append(faults, b.signal(Interrupt, rooms, 1))
		case x < 82:
			faults = append(faults, b.signal(Stop, rooms, 1))
			faults = append(faults, b.plays(rooms)...)
		case x < 92:
			faults = append(faults, Event{Kind: DropSocket, After: b.r.Duration(0, 300*time.Millisecond)})
		default:
			faults = append(faults, Event{Kind: Supersede, After: b.r.Duration(0, 500*time.Millisecond)})
		}
		// Replicas add the holder's pauses and hand-overs, drawn apart
		// so that a storm without replicas stays what its seed drew.
		if b.replicas {
			switch b.r.IntN(4) {
			case 0:
				faults = append(faults, b.pause())
			case 1:
				faults = append(faults, b.handOver())
			}
		}
	}
	return b.schedule(rooms, b.weave(waiting, later, faults))
}
