package proof

import (
	"fmt"
	"slices"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/seedrand"
)

// GenOptions shape random schedules. The zero value is the prover's
// default: 1–3 rooms, 1–5 messages each, every outcome, up to 6 faults.
type GenOptions struct {
	// MinRooms..MaxRooms rooms; zero means 1..3.
	MinRooms, MaxRooms int
	// MinMessages..MaxMessages messages per room; zero means 1..5.
	MinMessages, MaxMessages int
	// MaxFaults bounds the faults and control actions; zero means 6.
	MaxFaults int
	// RepliesOnly draws only plain replies (for agents that ignore the
	// spec and always answer).
	RepliesOnly bool
	// NoControl leaves out interrupts, stops and plays.
	NoControl bool
	// NoJoins leaves out rooms the agent joins during the run, for
	// agents that only serve the rooms they find at start-up.
	NoJoins bool
	// DurableShare is the share of schedules with a durable ledger; zero
	// means 0.3, negative means none.
	DurableShare float64
	// MaxAttempts is the agent's failure budget, bounding drawn failures;
	// zero means Budget.
	MaxAttempts int
	// Replicas, when 2 or more, gives every schedule that many replicas
	// sharing one leased ledger, each with a clock skewed within
	// MaxSkewPPM, and draws deaths, pauses and graceful hand-overs of the
	// holder, ledger outages and lost ledger answers beside the faults.
	Replicas int
	// NoSkew keeps every replica's clock at the database's rate, for
	// replicas whose clock the engine cannot skew (pgledger's reads the
	// bubble's).
	NoSkew bool
	// LeaseTime is the replicas' lease, which the pauses and outages drawn
	// are measured against; zero means DefaultLeaseTime.
	LeaseTime time.Duration
}

func (g GenOptions) withDefaults() GenOptions {
	if g.MaxRooms == 0 {
		g.MinRooms, g.MaxRooms = 1, 3
	}
	if g.MaxMessages == 0 {
		g.MinMessages, g.MaxMessages = 1, 5
	}
	g.MinRooms, g.MinMessages = max(g.MinRooms, 1), max(g.MinMessages, 1)
	if g.MaxFaults == 0 {
		g.MaxFaults = 6
	}
	g.MaxFaults = max(g.MaxFaults, 0)
	if g.DurableShare == 0 {
		g.DurableShare = 0.3
	}
	if g.MaxAttempts == 0 {
		g.MaxAttempts = Budget
	}
	return g
}

// Random draws the schedule for seed. The same seed and options always
// give the same schedule.
func Random(seed int64, g GenOptions) *Schedule {
	g = g.withDefaults()
	r := seedrand.New(uint64(seed))
	s := &Schedule{Seed: seed, Name: fmt.Sprintf("random seed %d", seed), Rooms: r.Between(g.MinRooms, g.MaxRooms)}
	s.Durable = g.DurableShare > 0 && r.Float64() < g.DurableShare

	// Now and then the agent joins a room (never the first) during the
	// run, and now and then the push that announces it is lost.
	joinAt := make([]int, s.Rooms)
	var joins []Event
	for room := 1; room < s.Rooms; room++ {
		if r.IntN(8) == 0 && !g.NoJoins {
			joinAt[room] = 1 + r.IntN(8)
			if r.IntN(2) == 0 {
				joins = append(joins, Event{At: joinAt[room], Kind: PushFault, PushEvent: "room_added", Push: PushLost})
			}
			joins = append(joins, Event{At: joinAt[room], Kind: Join, Room: room})
		}
	}

	var says []Event
	total := 0
	for room := range s.Rooms {
		n := r.Between(g.MinMessages, g.MaxMessages)
		total += n
		for i := range n {
			spec := drawSpec(r, g)
			spec.Label = fmt.Sprintf("r%dm%d", room+1, i+1)
			if spec.Key != "" {
				spec.Key = fmt.Sprintf("nk:r%d:%s", room+1, spec.Key)
			}
			says = append(says, Event{Kind: Say, Room: room, Spec: spec})
		}
	}
	lookAlikes(r, says)
	// About four requests a message, plus start-up: events drawn over
	// this span mostly land while there is work in flight.
	span := 3 + s.Rooms + 4*total
	for i := range says {
		if late := joinAt[says[i].Room]; late > 0 {
			says[i].At = r.Between(late, max(span, late))
		} else if r.IntN(4) == 0 {
			says[i].At = r.Between(1, span)
		}
	}
	quoteMarkers(r, says)
	var faults []Event
	for range r.IntN(g.MaxFaults + 1) {
		faults = append(faults, drawFault(r, s.Rooms, span, g)...)
	}
	if g.Replicas >= 2 {
		faults = append(faults, drawReplicas(s, seedrand.Named(seed, "replicas"), span, g)...)
	}
	s.Events = append(append(joins, says...), faults...)
	slices.SortStableFunc(s.Events, func(a, b Event) int { return a.At - b.At })
	return s
}

// drawReplicas makes s a schedule of g.Replicas replicas, with their
// clocks' skews, and draws 1 to 3 replica faults: the holder's death at a
// request or while idle, its pause (shorter or longer than the lease), a
// graceful hand-over, a ledger outage (shorter or longer than the lease),
// a lost ledger answer. Its own stream, so the rest of the schedule is
// what the seed draws without replicas.
func drawReplicas(s *Schedule, r seedrand.Rand, span int, g GenOptions) []Event {
	lease := g.LeaseTime
	if lease == 0 {
		lease = DefaultLeaseTime
	}
	s.Replicas, s.Durable = g.Replicas, true
	s.Skew = make([]int, g.Replicas)
	if r.IntN(2) == 0 && !g.NoSkew {
		for i := range s.Skew {
			s.Skew[i] = r.Between(-MaxSkewPPM, MaxSkewPPM)
		}
	}
	var out []Event
	for range 1 + r.IntN(3) {
		ev := Event{At: 1 + r.IntN(span)}
		if r.IntN(2) == 0 {
			ev.After = time.Duration(10+r.IntN(1490)) * time.Millisecond
		}
		switch x := r.IntN(12); {
		case x < 2:
			ev.Kind, ev.After = []EventKind{KillBefore, KillAfter}[r.IntN(2)], 0
			if r.IntN(2) == 0 {
				ev.Endpoint = fakeband.EndpointPost
			}
		case x < 5:
			ev.Kind = Pause
			ev.Delay = time.Duration(r.Between(int(lease/10/time.Millisecond), int(2*lease/time.Millisecond))) * time.Millisecond
		case x < 8:
			ev.Kind = Handover
		case x < 10:
			ev.Kind = LedgerOutage
			ev.Delay = time.Duration(r.Between(100, int(2*lease/time.Millisecond))) * time.Millisecond
		default:
			ev.Kind = LoseLedgerAnswer
		}
		out = append(out, ev)
	}
	return out
}

func drawSpec(r seedrand.Rand, g GenOptions) MessageSpec {
	spec := MessageSpec{Outcome: Reply}
	if !g.RepliesOnly {
		switch x := r.IntN(100); {
		case x < 10:
			spec.Outcome = NoReply
		case x < 22:
			spec.Fails = 1 + r.IntN(max(g.MaxAttempts-1, 1))
		case x < 27:
			spec.Outcome, spec.Fails = PanicThenReply, 1
		case x < 33:
			spec.Outcome = PermanentFailure
		case x < 38:
			spec.Outcome = AlwaysFail
		}
		if spec.Outcome.repliesEventually() && r.IntN(5) == 0 {
			spec.Key = []string{"a", "b"}[r.IntN(2)] // shared with the room's other a/b messages
		}
	}
	if r.IntN(6) == 0 {
		spec.Slow = time.Duration(50+r.IntN(1450)) * time.Millisecond
	}
	return spec
}

var faultEndpoints = []fakeband.Endpoint{
	fakeband.EndpointNext, fakeband.EndpointProcessing, fakeband.EndpointPost,
	fakeband.EndpointProcessed, fakeband.EndpointContext, fakeband.EndpointFailed,
}

// drawFault draws one fault or control action (a stop comes with its
// play).
func drawFault(r seedrand.Rand, rooms, span int, g GenOptions) []Event {
	at := 1 + r.IntN(span)
	ev := Event{At: at}
	if r.IntN(5) < 2 {
		ev.Endpoint = faultEndpoints[r.IntN(len(faultEndpoints))]
	}
	after := func() time.Duration {
		if r.IntN(2) == 0 {
			return 0
		}
		return time.Duration(10+r.IntN(1490)) * time.Millisecond
	}
	push := func(allowLost bool) (PushMode, time.Duration) {
		switch x := r.IntN(10); {
		case x == 0 && allowLost:
			return PushLost, 0
		case x == 1:
			return PushDuplicated, 0
		case x == 2:
			return PushLate, time.Duration(10+r.IntN(990)) * time.Millisecond
		}
		return PushNormal, 0
	}
	x := r.IntN(120)
	if g.NoControl && x >= 64 && x < 92 {
		x -= 40 // redraw among the transport faults
	}
	switch {
	case x >= 112:
		// A send Band applies late: held past the sender's request
		// timeout, so that it gave up on it, or while its sender is
		// killed, so that it lands in the next life. Always within
		// lateBound, the bound the agent assumes of Band.
		if ev.Endpoint == "" || r.IntN(3) > 0 {
			ev.Endpoint = []fakeband.Endpoint{fakeband.EndpointPost, fakeband.EndpointPost, fakeband.EndpointEvent}[r.IntN(3)]
		}
		ev.Kind = ApplyLate
		if x < 116 {
			// On the millisecond grid, past the shell's timeout.
			lo := int(shellGivesUp/time.Millisecond) + 1
			ev.Delay = time.Duration(lo+r.IntN(int(lateBound/time.Millisecond)-lo)) * time.Millisecond
			return []Event{ev}
		}
		ev.Delay = time.Duration(100+r.IntN(int(lateBound/time.Millisecond)-100)) * time.Millisecond
		kill := Event{At: at + 1, Kind: []EventKind{KillBefore, KillAfter}[r.IntN(2)]}
		return []Event{ev, kill}
	case x >= 108:
		// A spell of throttling, as a busy load balancer gives, lifted
		// some requests later.
		ev.Endpoint, ev.Kind = "", RateLimit
		ev.Rate, ev.Count = float64(5+r.IntN(36)), 1+r.IntN(8)
		if r.IntN(2) == 0 {
			ev.RetryAfter = "1"
		}
		return []Event{ev, {At: at + 5 + r.IntN(30), Kind: RateLimit}}
	case x >= 100:
		// A request the fake applies and whose answer goes wrong on the
		// way back: most often the reply POST, behind a load balancer.
		if ev.Endpoint == "" && r.IntN(2) == 0 {
			ev.Endpoint = fakeband.EndpointPost
		}
		if x < 104 {
			ev.Kind, ev.Status = AppliedThen5xx, []int{500, 502, 503, 504}[r.IntN(4)]
		} else {
			ev.Kind, ev.Delay = AnswerAfterGiveUp, time.Duration(2500+r.IntN(5500))*time.Millisecond
		}
	case x < 14:
		ev.Kind = KillBefore
	case x < 28:
		ev.Kind = KillAfter
	case x < 34:
		ev.Kind, ev.Status = Throttle, 429
		if r.IntN(2) == 0 {
			ev.RetryAfter = "1"
		}
	case x < 40:
		ev.Kind, ev.Status, ev.Count = ServerError, []int{500, 502, 503, 504}[r.IntN(4)], 1+r.IntN(3)
	case x < 45:
		ev.Kind, ev.Delay = Latency, time.Duration(50+r.IntN(2950))*time.Millisecond
	case x < 54:
		ev.Kind = LoseResponse
	case x < 58:
		ev.Kind, ev.Endpoint = StaleNext, fakeband.EndpointNext
	case x < 64:
		ev.Endpoint = ""
		ev.Kind, ev.PushEvent = PushFault, "message_created"
		ev.Push, ev.Delay = push(true)
		if ev.Push == PushNormal {
			ev.Push = PushLost
		}
	case x < 74:
		ev.Endpoint, ev.Kind, ev.After, ev.Room = "", Interrupt, after(), r.IntN(rooms)
		if r.IntN(5) == 0 {
			ev.Room = -1
		}
		ev.Push, ev.Delay = push(true)
	case x < 84:
		ev.Endpoint, ev.Kind, ev.After, ev.Room = "", Stop, after(), r.IntN(rooms)
		ev.Push, ev.Delay = push(true)
		play := Event{At: at + 1 + r.IntN(10), After: after(), Kind: Play, Room: ev.Room}
		play.Push, play.Delay = push(true)
		return []Event{ev, play}
	case x < 88:
		// A play missed while disconnected: the socket drops and the
		// play's push finds no connection.
		ev.Endpoint, ev.Kind, ev.After, ev.Room = "", Stop, after(), r.IntN(rooms)
		later := at + 1 + r.IntN(10)
		return []Event{ev, {At: later, Kind: DropSocket}, {At: later, Kind: Play, Room: ev.Room}}
	case x < 90:
		ev.Endpoint, ev.Kind = "", DropSocket
	case x < 92:
		ev.Endpoint, ev.Kind = "", Supersede
	default:
		ev.Kind = LoseResponse
		ev.Endpoint = fakeband.EndpointProcessed // the lost ack
	}
	return []Event{ev}
}

// lookAlikes makes some rooms' messages hard to tell apart by content: two
// or three of them say the same plain line ("ok"), as real rooms do. A
// key derived from the text, or a guard matching on it, confuses them.
// (Messages said at one instant also share their inserted_at.)
func lookAlikes(r seedrand.Rand, says []Event) {
	byRoom := map[int][]int{}
	for i, e := range says {
		byRoom[e.Room] = append(byRoom[e.Room], i)
	}
	for room := 0; room < len(byRoom); room++ {
		idx := byRoom[room]
		if len(idx) < 2 || r.IntN(4) != 0 {
			continue
		}
		text := []string{"ok", "thanks", "ok, thanks"}[r.IntN(3)]
		r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for _, i := range idx[:min(len(idx), 2+r.IntN(2))] {
			spec := &says[i].Spec
			spec.Outcome, spec.Fails, spec.Slow, spec.Key, spec.Text = Reply, 0, 0, "", text
		}
	}
}

// quoteMarkers has a human now and then paste, as the last line of a
// message, the dedup marker of an earlier message of the room: a guard
// that takes a marker from any sender for the agent's reply loses that
// message's answer.
func quoteMarkers(r seedrand.Rand, says []Event) {
	byRoom := map[int][]int{}
	for i, e := range says {
		byRoom[e.Room] = append(byRoom[e.Room], i)
	}
	for room := 0; room < len(byRoom); room++ {
		idx := byRoom[room]
		if len(idx) < 2 || r.IntN(5) != 0 {
			continue
		}
		j := 1 + r.IntN(len(idx)-1)
		quoted, quoting := &says[idx[r.IntN(j)]], &says[idx[j]]
		quoting.Spec.Quotes = quoted.Spec.Label
		quoting.At = max(quoting.At, quoted.At) // said after the message it quotes
	}
}
