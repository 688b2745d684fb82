package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/seedrand"
	"github.com/band-once/bandonce/proof"
)

// checkDef is a check: how to build one of its schedules from a seed.
type checkDef struct {
	name, doc string
	// control: the check needs control signals; noControl says why it
	// does not apply without them.
	control   bool
	noControl string
	// needsEffects, if set, is the note given when no run saw the agent
	// call the external system.
	needsEffects string
	// per10 is the share of the schedule count it runs, in tenths (0
	// means all of them); at least 2 run.
	per10 int
	build func(b *builder) trial
}

func (d *checkDef) count(n int) int {
	if d.per10 == 0 {
		return n
	}
	return max(2, n*d.per10/10)
}

// allDefs is the suite, in order.
var allDefs = []*checkDef{
	defKillBeforePost, defKillAfterPost, defLostAck, defLostReply, defDuplicateDelivery,
	defTransientErrors, defHandlerErrors, defNaturalKeys, defLookAlikes, defLongRoom, defJoinedRooms,
	defInterrupt, defStopAndPlay, defSupersede, defStorm,
}

const noSocket = "the agent declared NoControlSignals, so no signal can reach it"

var (
	defKillBeforePost = &checkDef{name: "kill-before-post", doc: "kill the agent before a reply is sent",
		build: func(b *builder) trial { return b.faulted(1, 4, b.kills(proof.KillBefore, fakeband.EndpointPost)) }}
	defKillAfterPost = &checkDef{name: "kill-after-post", doc: "kill the agent after Band applied its reply, before the answer",
		build: func(b *builder) trial { return b.faulted(1, 4, b.kills(proof.KillAfter, fakeband.EndpointPost)) }}
	defLostAck = &checkDef{name: "lost-ack", doc: "lose, fail or kill the processed mark",
		build: func(b *builder) trial { return b.faulted(1, 4, b.lostAcks) }}
	defLostReply = &checkDef{name: "lost-reply", doc: "lose or fail the answer to a reply POST, some applied and answered 5xx or after the client gave up, some applied late (after the client gave up, or after it died)",
		build: func(b *builder) trial { return b.faulted(1, 4, b.lostReplies) }}
	defDuplicateDelivery = &checkDef{name: "duplicate-delivery", doc: "serve messages again: stale /next, duplicated pushes, lost claims",
		build: func(b *builder) trial { return b.faulted(2, 5, b.duplicates) }}
	defTransientErrors = &checkDef{name: "transient-errors", doc: "429s with and without Retry-After, 5xx bursts and latency",
		build: func(b *builder) trial { return b.faulted(1, 5, b.transients) }}
	defHandlerErrors = &checkDef{name: "handler-errors", doc: "the external system fails first calls, so handlers fail and messages come back",
		needsEffects: "the agent performed no external effect, so no handler failure could be injected",
		build:        func(b *builder) trial { return b.handlerErrors() }}
	defNaturalKeys = &checkDef{name: "natural-keys", doc: "natural keys that contain one another, quoted in the humans' texts",
		build: func(b *builder) trial { return b.naturalKeys() }}
	defLongRoom = &checkDef{name: "long-room", doc: "a room beyond one page of context, then a kill after a late reply",
		per10: 1, build: func(b *builder) trial { return b.longRoom() }}
	defInterrupt = &checkDef{name: "interrupt", doc: "interrupts while the handler works and at request boundaries",
		control: true, noControl: noSocket,
		needsEffects: "the agent performed no external effect, so interrupts landed only between requests, never during its work",
		build:        func(b *builder) trial { return b.controlled(proof.Interrupt) }}
	defStopAndPlay = &checkDef{name: "stop-and-play", doc: "stop while the handler works, then play (some plays missed while disconnected)",
		control: true, noControl: noSocket,
		needsEffects: "the agent performed no external effect, so stops landed only between requests, never during its work",
		build:        func(b *builder) trial { return b.controlled(proof.Stop) }}
	defSupersede = &checkDef{name: "supersede", doc: "a newer connection of the agent takes over while it works",
		control: true, noControl: noSocket, build: func(b *builder) trial { return b.supersede() }}
	defStorm = &checkDef{name: "storm", doc: "the prover's random schedules: every fault and signal mixed",
		build: func(b *builder) trial { return b.storm() }}
)

// builder draws one schedule of a check from its seed.
type builder struct {
	r          seedrand.Rand
	seed       int64
	run        *runner
	notes      map[string]bool
	sawEffects bool
}

func newBuilder(seed int64, check string, run *runner) *builder {
	return &builder{r: seedrand.Named(seed, check), seed: seed, run: run, notes: map[string]bool{}}
}

func (b *builder) note(s string) { b.notes[s] = true }

func (b *builder) sortedNotes() []string {
	out := make([]string, 0, len(b.notes))
	for n := range b.notes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// says draws the humans' messages: lo..hi per room, most said before the
// agent starts, some while it works. It returns them and the request span
// they are likely to take.
func (b *builder) says(rooms, lo, hi int) ([]proof.Event, int) {
	var out []proof.Event
	total := 0
	for room := range rooms {
		n := b.r.Between(lo, hi)
		total += n
		for i := range n {
			spec := proof.MessageSpec{Label: fmt.Sprintf("r%dm%d", room+1, i+1), Outcome: proof.Reply}
			out = append(out, proof.Event{Kind: proof.Say, Room: room, Spec: spec})
		}
	}
	span := 4 + 5*total
	for i := range out {
		if b.r.IntN(4) == 0 {
			out[i].At = b.r.Between(1, span)
		}
	}
	return out, span
}

// plan draws the external system's behaviour: calls take a while, none
// fail.
func (b *builder) plan() externalPlan {
	return externalPlan{seed: b.r.Uint64(), minLatency: 20 * time.Millisecond, maxLatency: 400 * time.Millisecond, landShare: 0.5}
}

// schedule assembles events (sorted by request index, stably) into a
// schedule.
func (b *builder) schedule(rooms int, events []proof.Event) *proof.Schedule {
	slices.SortStableFunc(events, func(x, y proof.Event) int { return x.At - y.At })
	return &proof.Schedule{Seed: b.seed, Name: fmt.Sprintf("seed %d", b.seed), Rooms: rooms, Events: events}
}

// faulted is the common shape: 1–2 rooms, lo..hi messages each, and the
// faults draw makes.
func (b *builder) faulted(lo, hi int, draw func(rooms, span int) []proof.Event) trial {
	rooms := b.r.Between(1, 2)
	events, span := b.says(rooms, lo, hi)
	events = append(events, draw(rooms, span)...)
	s := b.schedule(rooms, events)
	s.StartAfter = b.outage()
	return trial{sched: s, ext: b.plan()}
}

// outage draws, for one schedule in four, how long the agent was down
// before its first life: ten minutes to three hours of virtual time, so
// the messages said before it are that old when it serves them. It draws
// from a stream of its own, so the schedules' other draws stay as they
// were.
func (b *builder) outage() time.Duration {
	r := rand.New(rand.NewPCG(uint64(b.seed), 0x6f757461676521))
	if r.IntN(4) != 0 {
		return 0
	}
	return (10*time.Minute + time.Duration(r.Int64N(int64(170*time.Minute)))).Truncate(time.Second)
}

func (b *builder) kills(kind proof.EventKind, ep fakeband.Endpoint) func(rooms, span int) []proof.Event {
	return func(_, span int) []proof.Event {
		var out []proof.Event
		for range b.r.Between(1, 2) {
			out = append(out, proof.Event{At: b.r.Between(1, span), Kind: kind, Endpoint: ep})
		}
		return out
	}
}

func (b *builder) lostAcks(_, span int) []proof.Event {
	var out []proof.Event
	for range b.r.Between(1, 2) {
		e := proof.Event{At: b.r.Between(1, span), Endpoint: fakeband.EndpointProcessed}
		switch b.r.IntN(4) {
		case 0:
			e.Kind = proof.LoseResponse
		case 1:
			e.Kind = proof.KillAfter
		case 2:
			e.Kind = proof.KillBefore
		default:
			e.Kind, e.Status, e.Count = proof.ServerError, 500+b.r.IntN(5), b.r.Between(1, 3)
		}
		out = append(out, e)
	}
	return out
}

func (b *builder) lostReplies(_, span int) []proof.Event {
	var out []proof.Event
	for range b.r.Between(1, 2) {
		e := proof.Event{At: b.r.Between(1, span), Endpoint: fakeband.EndpointPost, Kind: proof.LoseResponse}
		switch b.r.IntN(8) {
		case 0:
			e.Kind, e.Status, e.Count = proof.ServerError, 502+b.r.IntN(3), b.r.Between(1, 2)
		case 1:
			e.Kind, e.Status = proof.Throttle, 429
		case 2, 3:
			// Applied, then answered 5xx by the load balancer.
			e.Kind, e.Status = proof.AppliedThen5xx, 502+b.r.IntN(3)
		case 4, 5:
			// Applied at once, answered after any sane client timeout.
			e.Kind, e.Delay = proof.AnswerAfterGiveUp, b.r.Duration(3*time.Second, 8*time.Second)
		}
		out = append(out, e)
	}
	return append(out, b.appliedLate(span)...)
}

// appliedLate draws, in one schedule of three, a reply POST that Band
// applies late: after its sender gave up on it (within twice its request
// timeout, the bound the Shell assumes), or while its sender dies, so that
// it lands in the next life. It draws from a stream of its own, so the
// other faults of the check are drawn as they were before it.
func (b *builder) appliedLate(span int) []proof.Event {
	r := seedrand.Named(b.seed, "applied-late")
	if r.IntN(3) != 0 {
		return nil
	}
	e := proof.Event{At: r.Between(1, span), Endpoint: fakeband.EndpointPost, Kind: proof.ApplyLate}
	if r.IntN(2) == 0 {
		e.Delay = r.Duration(simRequestTimeout+time.Millisecond, 2*simRequestTimeout)
		return []proof.Event{e}
	}
	e.Delay = r.Duration(100*time.Millisecond, 2*simRequestTimeout)
	return []proof.Event{e, {At: e.At + 1, Kind: []proof.EventKind{proof.KillBefore, proof.KillAfter}[r.IntN(2)]}}
}

func (b *builder) duplicates(_, span int) []proof.Event {
	var out []proof.Event
	for range b.r.Between(1, 3) {
		e := proof.Event{At: b.r.Between(1, span)}
		switch b.r.IntN(5) {
		case 0:
			e.Kind, e.Endpoint = proof.StaleNext, fakeband.EndpointNext
		case 1:
			e.Kind, e.PushEvent, e.Push = proof.PushFault, "message_created", proof.PushDuplicated
		case 2:
			e.Kind, e.Endpoint = proof.LoseResponse, fakeband.EndpointProcessing
		case 3:
			e.Kind, e.Endpoint = proof.LoseResponse, fakeband.EndpointNext
		default:
			e.Kind, e.Endpoint = proof.KillAfter, fakeband.EndpointProcessing
		}
		out = append(out, e)
	}
	return out
}

var transientEndpoints = []fakeband.Endpoint{"", fakeband.EndpointNext, fakeband.EndpointProcessing,
	fakeband.EndpointContext, fakeband.EndpointPost, fakeband.EndpointProcessed, fakeband.EndpointFailed}

func (b *builder) transients(_, span int) []proof.Event {
	var out []proof.Event
	for range b.r.Between(1, 4) {
		e := proof.Event{At: b.r.Between(1, span), Endpoint: transientEndpoints[b.r.IntN(len(transientEndpoints))]}
		switch b.r.IntN(3) {
		case 0:
			e.Kind, e.Status = proof.Throttle, 429
			if b.r.IntN(2) == 0 {
				e.RetryAfter = "1"
			}
		case 1:
			e.Kind, e.Status, e.Count = proof.ServerError, 500+b.r.IntN(5), b.r.Between(1, 3)
		default:
			e.Kind, e.Delay = proof.Latency, b.r.Duration(50*time.Millisecond, 3*time.Second)
		}
		out = append(out, e)
	}
	return out
}

// failures is how many first calls of a failing effect key fail: fewer
// than the agent's budget, so no message deserves to be given up on.
func (b *builder) failures() int {
	n := min(2, b.run.cfg.maxAttempts-1)
	if n <= 0 {
		b.note("the agent gives up at its first failure (MaxAttempts 1), so no failure was injected")
	}
	return max(n, 0)
}

func (b *builder) handlerErrors() trial {
	tr := b.faulted(2, 5, func(int, int) []proof.Event { return nil })
	tr.ext.failures, tr.ext.failShare = b.failures(), 0.6
	return tr
}

// naturalKeys gives each message a natural key from a family whose keys
// contain one another, said longest first so a substring match would find
// a later key inside an earlier reply; the texts quote the keys.
func (b *builder) naturalKeys() trial {
	family := []string{"work:k10", "work:k1", "work:k11", "work:k2", "work:k20"}
	n := b.r.Between(2, len(family))
	var events []proof.Event
	for i := range n {
		spec := proof.MessageSpec{Label: fmt.Sprintf("r1m%d", i+1), Outcome: proof.Reply, Key: family[i]}
		events = append(events, proof.Event{Kind: proof.Say, Spec: spec})
	}
	if b.r.IntN(2) == 0 {
		events = append(events, proof.Event{At: b.r.Between(1, 4+5*n), Kind: proof.KillAfter, Endpoint: fakeband.EndpointPost})
	}
	return trial{sched: b.schedule(1, events), ext: b.plan()}
}

// longRoom fills one room with more messages than a page of /context
// holds, then kills the agent after a late reply.
func (b *builder) longRoom() trial {
	// 30 messages, all said at the start: from the 21st reply on, the
	// agent's context is longer than /context's first page (50 items).
	const messages = 30
	var events []proof.Event
	for i := range messages {
		events = append(events, proof.Event{Kind: proof.Say, Spec: proof.MessageSpec{Label: fmt.Sprintf("r1m%d", i+1), Outcome: proof.Reply}})
	}
	events = append(events, proof.Event{At: 5 * b.r.Between(23, 28), Kind: proof.KillAfter, Endpoint: fakeband.EndpointPost})
	ext := b.plan()
	ext.minLatency, ext.maxLatency = 0, 20*time.Millisecond
	return trial{sched: b.schedule(1, events), ext: ext}
}

// controlled places an interrupt or a stop while the handler works: a
// first run without it finds the agent's calls to the external system and
// the request each followed; the signal then comes in the middle of one
// (which sometimes hangs until its context ends). An agent that makes no
// such call gets the signal at request boundaries instead.
func (b *builder) controlled(kind proof.EventKind) trial {
	events, span := b.says(1, 1, 3)
	base := trial{sched: b.schedule(1, slices.Clone(events)), ext: b.plan()}
	obs := b.run.simulate(base).obs
	calls, _ := obs.world.snapshot()
	b.sawEffects = len(calls) > 0
	tr := base
	var signal proof.Event
	if len(calls) == 0 {
		signal = proof.Event{At: b.r.Between(2, span), After: b.r.Duration(0, 500*time.Millisecond), Kind: kind}
	} else {
		c := calls[b.r.IntN(len(calls))]
		if b.r.IntN(2) == 0 {
			tr.ext.hangKey, tr.ext.hangNth = c.key, c.nth
		}
		signal = proof.Event{At: c.requests + 1, After: b.r.Duration(time.Millisecond, max(c.latency-time.Millisecond, time.Millisecond)), Kind: kind}
	}
	if b.r.IntN(8) == 0 {
		signal.Push = proof.PushDuplicated
	}
	hang := hangAt{tr.ext.hangKey, tr.ext.hangNth}
	events = append(events, b.widen(kind, &signal, calls, obs.turnStarts(), &hang)...)
	tr.ext.hangKey, tr.ext.hangNth = hang.key, hang.nth
	events = append(events, signal)
	if kind == proof.Stop {
		play := proof.Event{At: signal.At + b.r.Between(1, 6), After: b.r.Duration(100*time.Millisecond, 2*time.Second), Kind: proof.Play}
		if b.r.IntN(4) == 0 { // the play is missed while the socket is down
			events = append(events, proof.Event{At: play.At, Kind: proof.DropSocket})
		}
		events = append(events, play)
	}
	tr.sched = b.schedule(1, events)
	return tr
}

// hangAt names the call of the external system that hangs.
type hangAt struct {
	key string
	nth int
}

// widen moves a control check's signal beyond the one window it aims at,
// drawing from a stream of its own so the schedule's other draws stay as
// they were: a third of the signals come in the window before a handler
// starts (its message claimed, the processing mark's answer on its way), a third of the interrupts are agent-wide (no room_id), a
// third of the interrupts come twice, seconds apart, each at a turn (the
// second at the last message's call, made to hang), and
// a third of the schedules drop the socket before the signal, so it
// reaches the agent on a new connection. It returns the events it adds.
func (b *builder) widen(kind proof.EventKind, signal *proof.Event, calls []effectCall, starts []int, hang *hangAt) []proof.Event {
	x := rand.New(rand.NewPCG(uint64(b.seed), 0x7369676e616c73))
	var out []proof.Event
	if len(starts) > 0 && x.IntN(3) == 0 {
		// Band applies the processing mark at once and answers it late:
		// the signal comes while the agent waits for that answer, its
		// message claimed and its handler not started.
		k := max(starts[x.IntN(len(starts))], 1)
		d := 300*time.Millisecond + time.Duration(x.Int64N(int64(300*time.Millisecond)))
		out = append(out, proof.Event{At: max(k-2, 1), Kind: proof.AnswerAfterGiveUp, Endpoint: fakeband.EndpointProcessing, Delay: d})
		signal.At, signal.After = k, d/2
	}
	if kind == proof.Interrupt && x.IntN(3) == 0 {
		signal.Room = -1
	}
	if kind == proof.Interrupt && x.IntN(3) == 0 && len(calls) > 0 {
		// The second comes at the last message's call, which hangs until
		// its context ends, so the interrupt finds it in flight however
		// the first one shortened the run.
		last := calls[len(calls)-1]
		if first := calls[0]; first.turn != nil && last.turn != nil && first.turn.msg != last.turn.msg {
			again := *signal
			again.At, again.After, again.Push = last.requests+1, time.Second+time.Duration(x.Int64N(int64(2*time.Second))), proof.PushNormal
			out = append(out, again)
			*hang = hangAt{last.key, last.nth}
		}
	}
	if x.IntN(3) == 0 && signal.At > 2 {
		out = append(out, proof.Event{At: max(signal.At/2, 1), Kind: proof.DropSocket})
	}
	return out
}

func (b *builder) supersede() trial {
	rooms := b.r.Between(1, 2)
	events, _ := b.says(rooms, 1, 4)
	return trial{sched: b.schedule(rooms, events), ext: b.plan(), supersede: b.r.Between(1, 8)}
}

func (b *builder) storm() trial {
	s := proof.Random(b.seed, proof.GenOptions{RepliesOnly: true, NoControl: b.run.cfg.noControl, DurableShare: -1,
		MaxRooms: 2, MaxMessages: 4, MaxAttempts: b.run.cfg.maxAttempts})
	ext := b.plan()
	ext.failures, ext.failShare = b.failures(), 0.3
	return trial{sched: s, ext: ext}
}
