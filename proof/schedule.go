package proof

import (
	"fmt"
	"strings"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// Schedule is one seeded scenario: rooms, the humans' messages and a plan
// of faults and control actions. The engine runs it deterministically, so
// a Schedule is its own replay.
type Schedule struct {
	// Seed seeds the fake Band and the agent's jitter.
	Seed int64
	// Name says where the schedule came from, for reports.
	Name string
	// Rooms is how many rooms there are; the agent is in each from the
	// start, unless the schedule has it Join the room later.
	Rooms int
	// Durable asks for an agent ledger that survives kills.
	Durable bool
	// Events happen in order; see Event.
	Events []Event
	// StartAfter is how long (virtual time) after the events before the
	// start the agent's first life starts: a backlog after an outage, so
	// the first messages are that old when they are served, and logic
	// that compares a message's age with the agent's clock matters.
	StartAfter time.Duration
	// Replicas, when 2 or more, runs that many replicas of the agent at
	// once, each a life after a life, sharing one ledger under a lease
	// (see ReplicaAgent); zero or one runs a single agent.
	Replicas int
	// Skew is each replica's clock rate against the ledger's, in parts
	// per million (replica i runs Skew[i] ppm fast; negative is slow).
	Skew []int
}

// EventKind says what an Event does.
type EventKind int

// Event kinds. The request-bound kinds (KillBefore through StaleNext, and
// AppliedThen5xx and AnswerAfterGiveUp) act on one request at the gate;
// the others act on the world when they fire.
const (
	// Say: a human posts Spec in Room, mentioning the agent.
	Say EventKind = iota
	// KillBefore: the request is never sent; the agent's life is killed.
	KillBefore
	// KillAfter: the fake applies the request, the response never
	// arrives, and the agent's life is killed.
	KillAfter
	// Throttle: the request is answered 429, with RetryAfter if set and
	// otherwise with an empty body, like Band's load balancer.
	Throttle
	// ServerError: Count consecutive requests to the endpoint are
	// answered Status (a 5xx) without being applied.
	ServerError
	// Latency: the request waits Delay at the fake before it is served.
	Latency
	// LoseResponse: the fake applies the request and the response is
	// lost; the agent lives on.
	LoseResponse
	// StaleNext: /next serves the message most recently processed, as a
	// stale replica would.
	StaleNext
	// Interrupt: Band interrupts the agent in Room, or everywhere when
	// Room is -1. Push says how its push travels.
	Interrupt
	// Stop: the room's owner stops the agent in Room.
	Stop
	// Play: the room's owner resumes the agent in Room.
	Play
	// DropSocket: the agent's socket connections drop, as a network
	// failure would.
	DropSocket
	// PushFault: the next PushEvent push the agent would receive is lost,
	// duplicated or delayed (Push).
	PushFault
	// Supersede: Band tells the agent another connection took over. An
	// agent that hears it must stop; the engine then starts a new life,
	// as a process supervisor would.
	Supersede
	// Join: the agent is added to Room, which it was not in before; Band
	// announces it with a room_added push (which a PushFault may lose).
	// A room with a Join event starts without the agent.
	Join
	// AppliedThen5xx: the fake applies the request and the agent is
	// answered Status (a 5xx) anyway, as a load balancer does when its
	// upstream answered too slowly for it.
	AppliedThen5xx
	// AnswerAfterGiveUp: the fake applies the request at once and its
	// answer takes Delay to come back, so a client with a shorter timeout
	// gives up on a request that did land.
	AnswerAfterGiveUp
	// ApplyLate: the fake holds the request Delay and then applies it,
	// whatever its sender did meanwhile: a sender that gave up on it
	// (Delay past its request timeout) or was killed (a kill drawn with
	// it) still has it applied, as a server that keeps working on an
	// abandoned request does. The answer goes to a sender still waiting.
	ApplyLate
	// RateLimit: from now on the fake throttles the agent as Band's load
	// balancer does, a token bucket of Count calls refilled at Rate a
	// second, answering 429 (with a Retry-After when RetryAfter is set,
	// otherwise with an empty body) to a call that finds it empty. A Rate
	// of zero lifts the throttle.
	RateLimit
	// Pause: the lease's holder (in a replicated schedule) is paused for
	// Delay, as SIGSTOP, a long GC pause or a frozen VM would: it sends
	// nothing new to Band or the ledger, and reads no answer, until it
	// wakes; what it had sent travels on.
	Pause
	// LedgerOutage: the shared ledger is unreachable for Delay: every
	// call of every replica fails, as while the database restarts.
	LedgerOutage
	// LoseLedgerAnswer: the next call to the shared ledger is applied and
	// its answer lost.
	LoseLedgerAnswer
	// Handover: the lease's holder is stopped gracefully (a deploy): its
	// context ends, it finishes and gives the lease up, and its replica
	// starts again as a standby.
	Handover
)

var eventNames = [...]string{
	Say: "say", KillBefore: "kill-before", KillAfter: "kill-after", Throttle: "throttle",
	ServerError: "server-error", Latency: "latency", LoseResponse: "lose-response",
	StaleNext: "stale-next", Interrupt: "interrupt", Stop: "stop", Play: "play",
	DropSocket: "drop-socket", PushFault: "push-fault", Supersede: "supersede", Join: "join",
	AppliedThen5xx: "applied-then-5xx", AnswerAfterGiveUp: "answer-after-give-up", RateLimit: "rate-limit",
	ApplyLate: "apply-late", Pause: "pause", LedgerOutage: "ledger-outage", LoseLedgerAnswer: "lose-ledger-answer",
	Handover: "handover",
}

// String names the kind as witnesses and traces spell it.
func (k EventKind) String() string {
	if k >= 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// requestBound reports whether the kind acts on one request at the gate.
func (k EventKind) requestBound() bool {
	return (k >= KillBefore && k <= StaleNext) || k == AppliedThen5xx || k == AnswerAfterGiveUp || k == ApplyLate
}

// aimed reports whether the event acts on a kind of request (the next
// POST, the next processed mark) rather than on whatever request comes.
func (e Event) aimed() bool { return e.Kind.requestBound() && e.Endpoint != "" }

// appliesTo reports whether a request-bound event of kind k can act on a
// request to ep: the two faults that answer an applied request differently
// make no sense for a socket upgrade, so they wait for the next request.
func (k EventKind) appliesTo(ep fakeband.Endpoint) bool {
	return ep != fakeband.EndpointSocket || (k != AppliedThen5xx && k != AnswerAfterGiveUp && k != ApplyLate)
}

// PushMode is how a control push (or, for PushFault, the next push)
// travels to the agent.
type PushMode int

// Push modes.
const (
	PushNormal PushMode = iota
	PushLost
	PushDuplicated
	PushLate
)

// String names the mode as witnesses spell it.
func (m PushMode) String() string {
	return [...]string{"normal", "lost", "duplicated", "late"}[m]
}

// Event is one step of a schedule. Events fire in list order. An event
// becomes due when the At-th request of the run (1-based, counted at the
// gate) is about to be released, or, when After is set, After of virtual
// time after request At-1 was released, whichever comes first; At 0 fires
// before the agent's first life starts. A request-bound event then waits
// for the next request to Endpoint ("" for any) and acts on it. When the
// system stalls or goes quiet with events left, the next one fires at
// once.
type Event struct {
	// At and After say when the event is due (see above); Kind what it
	// does.
	At       int
	After    time.Duration
	Kind     EventKind
	Endpoint fakeband.Endpoint // request-bound kinds only
	Room     int               // Say, Join and control kinds: the room's index; -1 is agent-wide (Interrupt only)
	Spec     MessageSpec       // Say
	Status   int               // Throttle (429), ServerError and AppliedThen5xx (5xx)
	// RetryAfter is Throttle's Retry-After header, in seconds; "" sends
	// an empty 429.
	RetryAfter string
	Count      int           // ServerError: the burst's length; RateLimit: the bucket's size
	Rate       float64       // RateLimit: calls a second
	Delay      time.Duration // Latency, AnswerAfterGiveUp, ApplyLate, PushLate, Pause and LedgerOutage
	Push       PushMode      // control kinds and PushFault
	PushEvent  string        // PushFault: the push it disturbs, e.g. "message_created"
}

// String describes the event in one line, for witnesses.
func (e Event) String() string {
	var b strings.Builder
	if e.At == 0 {
		b.WriteString("before start: ")
	} else {
		fmt.Fprintf(&b, "@req %d", e.At)
		if e.After > 0 {
			fmt.Fprintf(&b, " (or %s after req %d)", e.After, e.At-1)
		}
		b.WriteString(": ")
	}
	room := fmt.Sprintf("room %d", e.Room+1)
	if e.Room < 0 {
		room = "every room"
	}
	target := "the next request"
	if e.Endpoint != "" {
		target = "the next " + string(e.Endpoint) + " request"
	}
	switch e.Kind {
	case Say:
		fmt.Fprintf(&b, "human says %s in %s", e.Spec.said(), room)
	case KillBefore:
		fmt.Fprintf(&b, "kill the agent before %s is sent", target)
	case KillAfter:
		fmt.Fprintf(&b, "kill the agent after the fake applied %s, before its response", target)
	case Throttle:
		if e.RetryAfter != "" {
			fmt.Fprintf(&b, "429 with Retry-After %ss on %s", e.RetryAfter, target)
		} else {
			fmt.Fprintf(&b, "empty 429 on %s", target)
		}
	case ServerError:
		fmt.Fprintf(&b, "%d on %s and the %d after it to that endpoint", e.Status, target, max(e.Count, 1)-1)
	case Latency:
		fmt.Fprintf(&b, "%s latency on %s", e.Delay, target)
	case LoseResponse:
		fmt.Fprintf(&b, "lose the response of %s (applied)", target)
	case StaleNext:
		fmt.Fprintf(&b, "stale replica answers %s", target)
	case AppliedThen5xx:
		fmt.Fprintf(&b, "apply %s, then answer it %d", target, e.Status)
	case AnswerAfterGiveUp:
		fmt.Fprintf(&b, "apply %s at once, answer it %s later", target, e.Delay)
	case ApplyLate:
		fmt.Fprintf(&b, "hold %s %s, then apply it whatever its sender did", target, e.Delay)
	case Interrupt, Stop, Play:
		fmt.Fprintf(&b, "%s %s", e.Kind, room)
		if e.Push != PushNormal {
			fmt.Fprintf(&b, " (push %s", e.Push)
			if e.Push == PushLate {
				fmt.Fprintf(&b, " by %s", e.Delay)
			}
			b.WriteString(")")
		}
	case DropSocket:
		b.WriteString("drop the agent's socket")
	case Supersede:
		b.WriteString("supersede the agent's connection")
	case Join:
		fmt.Fprintf(&b, "the agent joins %s", room)
	case RateLimit:
		if e.Rate <= 0 {
			b.WriteString("Band stops throttling the agent")
			break
		}
		fmt.Fprintf(&b, "Band throttles the agent to %g calls a second (burst %d), 429s ", e.Rate, e.Count)
		if e.RetryAfter != "" {
			b.WriteString("with Retry-After")
		} else {
			b.WriteString("with an empty body")
		}
	case Pause:
		fmt.Fprintf(&b, "pause the lease's holder for %s", e.Delay)
	case LedgerOutage:
		fmt.Fprintf(&b, "the ledger is unreachable for %s", e.Delay)
	case LoseLedgerAnswer:
		b.WriteString("the next ledger call is applied and its answer lost")
	case Handover:
		b.WriteString("the lease's holder hands over gracefully (stopped, then started again as a standby)")
	case PushFault:
		fmt.Fprintf(&b, "next %s push %s", e.PushEvent, e.Push)
		if e.Push == PushLate {
			fmt.Fprintf(&b, " by %s", e.Delay)
		}
	default:
		b.WriteString(e.Kind.String())
	}
	return b.String()
}

// Outcome is what the prover's handler does with a message. It travels in
// the message's text, so a killed and restarted agent does the same.
type Outcome int

// Outcomes.
const (
	// Reply: reply after Fails failures.
	Reply Outcome = iota
	// NoReply: consume the message without a reply.
	NoReply
	// PanicThenReply: panic Fails times, then reply.
	PanicThenReply
	// PermanentFailure: fail with bandonce.Permanent; dead-lettered at once.
	PermanentFailure
	// AlwaysFail: fail every time; dead-lettered when the budget runs out.
	AlwaysFail
)

var outcomeNames = [...]string{"reply", "no-reply", "panic-then-reply", "permanent", "always-fail"}

// String names the outcome as message specs spell it.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// repliesEventually reports whether a reply is due once the failures are
// behind it.
func (o Outcome) repliesEventually() bool { return o == Reply || o == PanicThenReply }

// deadLetters reports whether the message is bound to be given up on.
func (o Outcome) deadLetters() bool { return o == PermanentFailure || o == AlwaysFail }

// MessageSpec is one human message and what the handler does with it.
type MessageSpec struct {
	// Label names the message in reports ("r1m2"); it survives shrinking.
	Label string
	// Outcome is what the handler does with the message.
	Outcome Outcome
	// Fails is how many failures (or panics) come before the reply.
	Fails int
	// Slow is how long the handler works, honouring its context.
	Slow time.Duration
	// Key is the reply's natural dedup key; "" means the message's
	// default key. Messages sharing a key share one reply.
	Key string
	// Text, if set, is what the human writes instead of the spec: a
	// line such as "ok" that other messages of the room may share. No
	// spec can be read from it, so the message is answered plainly: it
	// must be a Reply with no failures, no delay and no Key.
	Text string
	// Quotes, if set, is the label of an earlier message of the room
	// whose dedup marker the human pastes as the last line of this one,
	// as someone pasting the agent's output back into the chat does.
	Quotes string
}

// said describes the message for witnesses: its spec, or its text and
// label when it has one, and the marker it quotes.
func (s MessageSpec) said() string {
	out := s.String()
	if s.Text != "" {
		out = fmt.Sprintf("%q (%s, answered plainly)", s.Text, s.Label)
	}
	if s.Quotes != "" {
		out += fmt.Sprintf(", pasting %s's dedup marker as its last line", s.Quotes)
	}
	return out
}

// body is the text the human writes, before any quoted marker.
func (s MessageSpec) body() string {
	if s.Text != "" {
		return s.Text
	}
	return s.String()
}

// String is the spec as the human writes it; ParseSpec reads it back.
func (s MessageSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.Label, s.Outcome)
	if s.Fails > 0 {
		fmt.Fprintf(&b, " fails=%d", s.Fails)
	}
	if s.Slow > 0 {
		fmt.Fprintf(&b, " slow=%s", s.Slow)
	}
	if s.Key != "" {
		fmt.Fprintf(&b, " key=%s", s.Key)
	}
	return b.String()
}

// ParseSpec reads a spec written by MessageSpec.String, as the handler
// does from a message's body. Only the first line is read: a line pasted
// after it (a quoted marker) is not part of the spec.
func ParseSpec(text string) (MessageSpec, error) {
	first, _, _ := strings.Cut(text, "\n")
	fields := strings.Fields(first)
	if len(fields) < 2 {
		return MessageSpec{}, fmt.Errorf("proof: not a message spec: %q", text)
	}
	s := MessageSpec{Label: fields[0], Outcome: -1}
	for i, name := range outcomeNames {
		if fields[1] == name {
			s.Outcome = Outcome(i)
		}
	}
	if s.Outcome < 0 {
		return MessageSpec{}, fmt.Errorf("proof: unknown outcome %q", fields[1])
	}
	for _, f := range fields[2:] {
		name, value, _ := strings.Cut(f, "=")
		var err error
		switch name {
		case "fails":
			_, err = fmt.Sscanf(value, "%d", &s.Fails)
		case "slow":
			s.Slow, err = time.ParseDuration(value)
		case "key":
			s.Key = value
		default:
			err = fmt.Errorf("unknown field %q", name)
		}
		if err != nil {
			return MessageSpec{}, fmt.Errorf("proof: bad spec %q: %w", text, err)
		}
	}
	return s, nil
}

// joinsLater reports whether the agent joins room i during the schedule
// rather than being in it from the start.
func (s *Schedule) joinsLater(i int) bool {
	for _, e := range s.Events {
		if e.Kind == Join && e.Room == i {
			return true
		}
	}
	return false
}

// clone returns a copy whose Events can be changed freely.
func (s *Schedule) clone() *Schedule {
	c := *s
	c.Events = append([]Event(nil), s.Events...)
	return &c
}

// The prover's model of Band applying a request late (ApplyLate).
const (
	// shellGivesUp is the request timeout of the prover's shell: a hold
	// longer than it is one the shell gave up on.
	shellGivesUp = 2*time.Second + 311*time.Microsecond
	// lateBound is the latest the prover's Band applies a held request,
	// after it was sent: within the settle window the shell assumes
	// (Config.SettleWindow's default, twice its request timeout).
	lateBound = 4 * time.Second
)
