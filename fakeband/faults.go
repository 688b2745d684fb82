package fakeband

import (
	"fmt"
	"time"
)

// Endpoint names a request class for faults and request counts.
type Endpoint string

// Endpoints. The agent endpoints are the ones an empty Fault.Endpoint
// matches; human_post, control and socket only match by name.
const (
	EndpointMe         Endpoint = "me"         // GET /agent/me
	EndpointChats      Endpoint = "chats"      // GET /agent/chats
	EndpointNext       Endpoint = "next"       // GET /agent/chats/{id}/messages/next
	EndpointProcessing Endpoint = "processing" // POST .../messages/{mid}/processing
	EndpointProcessed  Endpoint = "processed"  // POST .../messages/{mid}/processed
	EndpointFailed     Endpoint = "failed"     // POST .../messages/{mid}/failed
	EndpointPost       Endpoint = "post"       // POST /agent/chats/{id}/messages
	EndpointContext    Endpoint = "context"    // GET /agent/chats/{id}/context
	EndpointMessages   Endpoint = "messages"   // GET /agent/chats/{id}/messages?status=
	EndpointEvent      Endpoint = "event"      // POST /agent/chats/{id}/events
	EndpointActivity   Endpoint = "activity"   // POST /agent/chats/{id}/activity
	// EndpointParticipants lists a room's participants (GET .../participants).
	EndpointParticipants      Endpoint = "participants"
	EndpointAddParticipant    Endpoint = "add_participant"    // POST /agent/chats/{id}/participants
	EndpointRemoveParticipant Endpoint = "remove_participant" // DELETE .../participants/{pid}
	EndpointCreateChat        Endpoint = "create_chat"        // POST /agent/chats
	EndpointPeers             Endpoint = "peers"              // GET /agent/peers
	EndpointCreateMemory      Endpoint = "create_memory"      // POST /agent/memories
	EndpointMemories          Endpoint = "memories"           // GET /agent/memories
	EndpointMemory            Endpoint = "memory"             // GET /agent/memories/{id}
	EndpointMemoryStatus      Endpoint = "memory_status"      // POST /agent/memories/{id}/supersede or /archive
	EndpointCreateTask        Endpoint = "create_task"        // POST /agent/chats/{id}/tasks
	EndpointTasks             Endpoint = "tasks"              // GET /agent/chats/{id}/tasks
	EndpointTask              Endpoint = "task"               // GET /agent/chats/{id}/tasks/{tid}
	EndpointUpdateTask        Endpoint = "update_task"        // POST /agent/chats/{id}/tasks/{tid}
	EndpointTaskHistory       Endpoint = "task_history"       // GET .../tasks/{tid}/history
	EndpointBoard             Endpoint = "board"              // GET /agent/chats/{id}/board
	EndpointPutBoard          Endpoint = "put_board"          // PUT /agent/chats/{id}/board
	EndpointChat              Endpoint = "chat"               // GET /agent/chats/{id}
	EndpointRenameChat        Endpoint = "rename_chat"        // PATCH /agent/chats/{id}
	EndpointContacts          Endpoint = "contacts"           // GET /agent/contacts
	EndpointAddContact        Endpoint = "add_contact"        // POST /agent/contacts/add
	EndpointRemoveContact     Endpoint = "remove_contact"     // POST /agent/contacts/remove
	EndpointContactRequests   Endpoint = "contact_requests"   // GET /agent/contacts/requests
	EndpointRespondContact    Endpoint = "respond_contact"    // POST /agent/contacts/requests/respond
	EndpointHumanPost         Endpoint = "human_post"         // POST /me/chats/{id}/messages
	EndpointControl           Endpoint = "control"            // the /me stop, play, executions and interrupt routes
	EndpointSocket            Endpoint = "socket"             // GET /socket/websocket (the upgrade)
)

func (e Endpoint) isAgent() bool {
	switch e {
	case EndpointHumanPost, EndpointControl, EndpointSocket:
		return false
	}
	return true
}

// FaultKind says what a firing Fault does to its request.
type FaultKind int

// Fault kinds.
const (
	// FailBefore answers Status without applying anything.
	FailBefore FaultKind = iota
	// LoseResponse applies the request, then fails it with a transport
	// error: the in-memory client returns ErrResponseLost, a TCP client
	// sees its connection closed.
	LoseResponse
	// Delay waits Delay (or until the request is cancelled) and then
	// serves the request normally. A request whose client gave up, or
	// died, while it waited is never applied.
	Delay
	// StaleNext makes one /next serve the message most recently marked
	// processed by that agent in that room, as a stale replica would.
	// When there is no such message (or the room is stopped) /next answers
	// as usual and FaultsFired does not count it.
	StaleNext
	// LoopCursor answers a /context page with has_more and a next_cursor
	// that points back at the page itself (the request's own cursor, or
	// the room's start for a first page), as a server bug or a proxy
	// cache would. Only endpoint context.
	LoopCursor
	// ApplyLate holds the request Delay and then applies it, whether or
	// not its client is still there: a server that keeps working on a
	// request after its client gave up on it, or was killed. The answer
	// goes to a client that still waits for it. Only Close cuts the hold
	// short, and then nothing is applied.
	ApplyLate
)

func (k FaultKind) String() string {
	switch k {
	case FailBefore:
		return "fail_before"
	case LoseResponse:
		return "lose_response"
	case Delay:
		return "delay"
	case StaleNext:
		return "stale_next"
	case LoopCursor:
		return "loop_cursor"
	case ApplyLate:
		return "apply_late"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is a rule that disturbs matching requests. Rules are checked in
// the order injected and the first one that fires applies.
type Fault struct {
	Endpoint    Endpoint      // "" matches any agent endpoint
	Nth         int           // fire on the Nth matching request (1-based); 0 = use Probability
	Count       int           // with Nth: fire on this many consecutive matches (0 = 1)
	Probability float64       // with Nth == 0: seeded chance per matching request
	Kind        FaultKind     // what firing does
	Status      int           // FailBefore: e.g. 500, 503, 429 (0 = 503)
	Code        string        // FailBefore: the error code ("" = one named after Status); 403 limit_reached is Band's plan quota
	RetryAfter  string        // FailBefore: Retry-After header value ("" = none)
	EmptyBody   bool          // FailBefore: no body at all (like the load balancer's 429)
	Delay       time.Duration // Delay and ApplyLate: how long to hold the request before serving it
}

type faultRule struct {
	Fault
	seen int // matching requests so far
}

// faultState holds the rules and the histogram. Callers hold b.mu.
type faultState struct {
	rules  []*faultRule
	socket []*socketRule
	fired  map[string]int
}

func (f *faultState) init() { f.fired = map[string]int{} }

// Inject adds a fault rule after the existing ones. Its counting starts now.
func (b *Band) Inject(f Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults.rules = append(b.faults.rules, &faultRule{Fault: f})
	b.noteFaultsLocked()
}

// ClearFaults removes every request and socket fault rule and lifts the
// rate limit. The histogram of fired faults is kept.
func (b *Band) ClearFaults() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults.rules = nil
	b.faults.socket = nil
	b.rate = limiter{buckets: map[string]*bucket{}}
	b.noteFaultsLocked()
}

// FaultsFired is a histogram "endpoint/kind" -> times fired, for example
// "next/stale_next" or, for socket faults, "socket/lose_push". A request
// an ApplyLate fault held counts as "endpoint/apply_late" when it is
// taken, and again as "endpoint/applied_late" once it was applied.
func (b *Band) FaultsFired() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.faults.fired))
	for k, v := range b.faults.fired {
		out[k] = v
	}
	return out
}

// pickFaultLocked advances every rule that matches ep and returns the
// first that fires, or nil. Every matching rule counts the request (and
// draws, if probabilistic) whether or not an earlier one fired, so a
// rule's Nth does not depend on the rules before it.
func (b *Band) pickFaultLocked(ep Endpoint) *Fault {
	var chosen *Fault
	for _, r := range b.faults.rules {
		if r.Endpoint != ep && (r.Endpoint != "" || !ep.isAgent()) {
			continue
		}
		r.seen++
		if fires(r, b.rng.Float64) && chosen == nil {
			chosen = &r.Fault
		}
	}
	if chosen != nil && chosen.Kind != StaleNext {
		b.faults.fired[string(ep)+"/"+chosen.Kind.String()]++
	}
	return chosen
}

// holdsRequests reports whether a rule may hold a request before it is
// answered, rather than answer it at once.
func holdsRequests(rules []*faultRule) bool {
	for _, r := range rules {
		if r.Kind == Delay || r.Kind == ApplyLate {
			return true
		}
	}
	return false
}

// fires decides one matching request. draw is only called for
// probabilistic rules, so Nth rules do not consume randomness.
func fires(r *faultRule, draw func() float64) bool {
	if r.Nth > 0 {
		count := max(r.Count, 1)
		return r.seen >= r.Nth && r.seen-r.Nth < count // not r.Nth+count: that may overflow
	}
	return draw() < r.Probability
}
