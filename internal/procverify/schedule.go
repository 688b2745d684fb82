package procverify

import (
	"fmt"
	"strings"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// Schedule is one seeded scenario for an agent process: rooms, the humans'
// messages, and faults and control actions in order.
type Schedule struct {
	// Check is the check that drew it and Seed the seed it drew it from:
	// the pair names the schedule and replays it.
	Check string
	Seed  int64
	// Rooms is how many rooms the agent is in.
	Rooms int
	// Events happen one after another; see Event.
	Events []Event
}

// Kind says what an Event does.
type Kind int

// Event kinds. The kinds from KillBefore to StaleNext act on one request
// of the agent; Interrupt and Stop do too when their Endpoint is set
// (then the request's answer is held while the signal travels). The
// others act on the world when they fire.
const (
	// Say: a human posts in Room, mentioning the agent.
	Say Kind = iota
	// KillBefore: the request is held, the agent's process group is
	// killed with SIGKILL, and the request is never applied.
	KillBefore
	// KillAfter: the request is held, the process group is killed, then
	// the request is applied: the agent never sees the answer.
	KillAfter
	// LoseResponse: the request is applied and its connection closed
	// before any answer; the agent lives on.
	LoseResponse
	// Throttle: the request is answered 429, with Retry-After if set and
	// otherwise with an empty body, like Band's load balancer.
	Throttle
	// ServerError: the request and the Count-1 after it to the same
	// endpoint are answered Status (a 5xx) without being applied.
	ServerError
	// Latency: the request waits Delay before it is applied.
	Latency
	// StaleNext: /next serves the message last processed, as a stale
	// replica would.
	StaleNext
	// Interrupt: Band interrupts the agent in Room (timed), or in the
	// room of the request it acts on.
	Interrupt
	// Stop: the room's owner stops the agent in Room, or in the room of
	// the request it acts on.
	Stop
	// Play: the room's owner resumes the agent in Room.
	Play
	// DropSocket: the agent's socket connections drop.
	DropSocket
	// Supersede: Band tells the agent another connection took over; the
	// process must send nothing more and exit (non-zero with
	// Config.SupersedeExitCode), and the verifier then starts it again,
	// as a supervisor would.
	Supersede
	// ApplyLate: the request is held Delay and then applied, whatever
	// the agent did meanwhile: gave up on it (Delay past the agent's
	// request timeout) or was killed (a kill drawn after it), as a server
	// that keeps working on an abandoned request does. Delay stays within
	// LateBound, the bound the agent is told of (see agentEnv).
	ApplyLate
	// Pause: with replicas, the holder's request is applied, its whole
	// process group is stopped (SIGSTOP) until another replica takes
	// over, and Delay after that it is resumed (SIGCONT) and gets the
	// answer: a holder paused past its lease that wakes mid-turn.
	Pause
	// HandOver: with replicas, the holder's request is applied and
	// answered, and the holder gets SIGTERM, as a deploy does: it must
	// exit 0 within the grace, another replica takes over, and a new one
	// is started in its place.
	HandOver
)

var kindNames = [...]string{
	Say: "say", KillBefore: "kill-before", KillAfter: "kill-after", LoseResponse: "lose-response",
	Throttle: "throttle", ServerError: "server-error", Latency: "latency", StaleNext: "stale-next",
	Interrupt: "interrupt", Stop: "stop", Play: "play", DropSocket: "drop-socket", Supersede: "supersede",
	ApplyLate: "apply-late", Pause: "pause", HandOver: "hand-over",
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one step of a schedule. Events fire in order; each becomes
// current when the one before it has fired. A request-bound event then
// acts on the (Skip+1)-th request to Endpoint that arrives ("" for any
// endpoint); any other event fires After once current. An event whose
// request never comes is dropped when the system goes quiet (a kill then
// hits the agent where it stands, if it is stalled rather than quiet).
// Leading Say events with no After are said before the agent starts.
type Event struct {
	Kind     Kind
	Endpoint fakeband.Endpoint
	Skip     int
	After    time.Duration
	// Room is the room's index for Say, Play, DropSocket's successor and
	// timed signals.
	Room int
	// Label names a Say's message in reports ("r1m2"); its text is the
	// label too, so a reply that quotes it is easy to read.
	Label      string
	Status     int    // Throttle and ServerError
	RetryAfter string // Throttle: "" sends an empty 429
	Count      int    // ServerError: the burst's length
	Delay      time.Duration
}

// aimed reports whether the event acts on a kind of request (the next
// POST, the next processed mark) rather than on whatever request comes.
func (e Event) aimed() bool { return e.requestBound() && e.Endpoint != "" }

// requestBound reports whether the event acts on a request of the agent.
func (e Event) requestBound() bool {
	switch e.Kind {
	case KillBefore, KillAfter, LoseResponse, Throttle, ServerError, Latency, StaleNext, ApplyLate, Pause, HandOver:
		return true
	case Interrupt, Stop:
		return e.Endpoint != ""
	}
	return false
}

// isKill reports whether the event kills the agent.
func (e Event) isKill() bool { return e.Kind == KillBefore || e.Kind == KillAfter }

var endpointNames = map[fakeband.Endpoint]string{
	fakeband.EndpointMe: "GET /agent/me", fakeband.EndpointChats: "GET /agent/chats",
	fakeband.EndpointNext: "GET /messages/next", fakeband.EndpointProcessing: "POST processing",
	fakeband.EndpointProcessed: "POST processed", fakeband.EndpointFailed: "POST failed",
	fakeband.EndpointPost: "POST messages (a reply)", fakeband.EndpointContext: "GET /context",
	fakeband.EndpointSocket: "socket upgrade",
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// String describes the event in one line, for witnesses.
func (e Event) String() string {
	var b strings.Builder
	if e.requestBound() {
		what := "request"
		if name, ok := endpointNames[e.Endpoint]; ok {
			what = name
		}
		fmt.Fprintf(&b, "on the %s %s: ", ordinal(e.Skip+1), what)
	} else if e.After > 0 {
		fmt.Fprintf(&b, "%s later: ", e.After)
	}
	room := fmt.Sprintf("room %d", e.Room+1)
	switch e.Kind {
	case Say:
		fmt.Fprintf(&b, "a human says %q in %s", e.Label, room)
	case KillBefore:
		b.WriteString("SIGKILL the agent's process group; the request is never applied")
	case KillAfter:
		b.WriteString("SIGKILL the agent's process group, then apply the request (its answer is lost)")
	case LoseResponse:
		b.WriteString("apply it and close the connection before the answer")
	case Throttle:
		if e.RetryAfter != "" {
			fmt.Fprintf(&b, "answer 429 with Retry-After %ss", e.RetryAfter)
		} else {
			b.WriteString("answer an empty 429")
		}
	case ServerError:
		fmt.Fprintf(&b, "answer %d to it and the %d after it to that endpoint", e.Status, max(e.Count, 1)-1)
	case Latency:
		fmt.Fprintf(&b, "hold it %s before applying it", e.Delay)
	case StaleNext:
		b.WriteString("a stale replica serves the message last processed")
	case ApplyLate:
		fmt.Fprintf(&b, "hold it %s, then apply it whatever the agent did meanwhile", e.Delay)
	case Pause:
		fmt.Fprintf(&b, "apply it, SIGSTOP the holder's process group until another replica takes over, SIGCONT it %s later, then answer", e.Delay)
	case HandOver:
		b.WriteString("apply and answer it, then SIGTERM the holder (a hand-over: exit 0 expected; a new replica is started)")
	case Interrupt, Stop:
		if e.Endpoint != "" {
			fmt.Fprintf(&b, "apply it, hold its answer, %s the agent in that room, then answer", e.Kind)
		} else {
			fmt.Fprintf(&b, "%s the agent in %s", e.Kind, room)
		}
	case Play:
		fmt.Fprintf(&b, "play the agent in %s", room)
	case DropSocket:
		b.WriteString("drop the agent's socket connections")
	case Supersede:
		b.WriteString("supersede the agent's connection (it must send nothing more and exit; it is then restarted)")
	default:
		b.WriteString(e.Kind.String())
	}
	return b.String()
}

// clone returns a copy whose Events can be changed freely.
func (s *Schedule) clone() *Schedule {
	c := *s
	c.Events = append([]Event(nil), s.Events...)
	return &c
}

// said returns how many messages the schedule says.
func (s *Schedule) said() int {
	n := 0
	for _, e := range s.Events {
		if e.Kind == Say {
			n++
		}
	}
	return n
}

// The verifier's model of Band applying a request late (ApplyLate), and
// what it tells the agent of it through the environment, unless the
// user's environment already says: BANDONCE_REQUEST_TIMEOUT and
// BANDONCE_SETTLE_WINDOW, which band-once's ConfigFromEnv reads.
const (
	// AgentRequestTimeout is the request timeout the agent is asked to
	// use; a hold past it is one the agent gave up on.
	AgentRequestTimeout = 2 * time.Second
	// LateBound is the latest this Band applies a request after it
	// arrived.
	LateBound = 3500 * time.Millisecond
	// AgentSettleWindow is the settle window the agent is told: longer
	// than LateBound, as the assumption wants.
	AgentSettleWindow = 4 * time.Second
)
