package bandonce

import (
	"bytes"
	"context"
	"fmt"
	"sync"
)

// KeyState is what a Ledger knows of one reply key in one room.
type KeyState int

const (
	// KeyUnknown: no record.
	KeyUnknown KeyState = iota
	// KeyIntent: a post of this key was about to be sent; it may or may
	// not have landed.
	KeyIntent
	// KeyAccepted: the reply with this key was posted.
	KeyAccepted
	// KeyDuplicateDropped: the reply was found already posted and dropped.
	KeyDuplicateDropped
)

func (s KeyState) String() string {
	switch s {
	case KeyIntent:
		return "intent"
	case KeyAccepted:
		return "accepted"
	case KeyDuplicateDropped:
		return "duplicate-dropped"
	default:
		return "unknown"
	}
}

// InRoom reports whether the reply with this key is known to be in the room.
func (s KeyState) InRoom() bool { return s == KeyAccepted || s == KeyDuplicateDropped }

// Ledger records what the shell did, so a later delivery of the same
// message can be answered without repeating it. The shell calls it from one
// goroutine per room; implementations must be safe for concurrent use
// across rooms.
type Ledger interface {
	// Key returns the state of a reply key in a room.
	Key(ctx context.Context, room, key string) (KeyState, error)
	// SetKey records a key's state. When state is KeyIntent the record
	// must be durable, if the ledger is, before SetKey returns: the post
	// it protects follows at once.
	SetKey(ctx context.Context, room, key string, state KeyState) error
	// AckPending reports whether the message's fate is decided (its reply
	// posted, or none due) and only its processed mark is outstanding.
	AckPending(ctx context.Context, room, messageID string) (bool, error)
	// SetAckPending records (pending true) or clears (false) that state.
	SetAckPending(ctx context.Context, room, messageID string, pending bool) error
	// Step returns the result a journaled step (Message.Step) recorded
	// for a message, and whether one is recorded. A recorded empty result
	// is ok with a nil or empty slice. The result is the caller's: the
	// ledger keeps no reference to it.
	Step(ctx context.Context, room, messageID, name string) (result []byte, ok bool, err error)
	// SetStep records a step's result. The record must be durable, if the
	// ledger is, before SetStep returns: the shell returns the result to
	// the handler only after that, and a later delivery of the message
	// returns the record instead of running the step again. The ledger
	// must not keep a reference to result.
	SetStep(ctx context.Context, room, messageID, name string, result []byte) error
	// Durable reports whether records survive a crash of the process. A
	// durable ledger's KeyUnknown means this agent never tried to post
	// the key, which lets the shell skip the room read.
	Durable() bool
}

// MemoryLedger is the default Ledger: in memory, lost with the process.
// It keeps at most its cap of keys and of step results per room, evicting
// the oldest; forgetting a key only costs a room read on a later
// redelivery, and forgetting a step runs it again, with the same
// idempotency key. Ack-pending records are never evicted. It belongs to
// the first agent that binds it (AgentBinder): a shell of another agent
// given the same one is refused at start, since its records would say
// replies were posted that agent never posted. The zero value is ready to
// use.
type MemoryLedger struct {
	// MaxKeysPerRoom bounds the keys, and separately the step results,
	// kept per room. Zero means 10000.
	MaxKeysPerRoom int

	mu    sync.Mutex
	agent string // the agent bound, "" before any
	rooms map[string]*memoryRoom
	dead  []DeadLetter // oldest first; see deadletters.go
}

// BindAgent implements AgentBinder: the first agent's id is kept, and any
// other is refused with an error matching ErrAgentMismatch.
func (l *MemoryLedger) BindAgent(_ context.Context, agentID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.agent {
	case "":
		l.agent = agentID
	case agentID:
	default:
		return fmt.Errorf("%w: this MemoryLedger is agent %s's, not %s's", ErrAgentMismatch, l.agent, agentID)
	}
	return nil
}

type memoryRoom struct {
	keys      map[string]KeyState
	order     []string // insertion order of keys, for eviction
	acks      map[string]bool
	steps     map[stepID][]byte
	stepOrder []stepID // insertion order of steps, for eviction
}

// stepID names one journaled step of one message.
type stepID struct{ message, name string }

// NewMemoryLedger returns an empty MemoryLedger.
func NewMemoryLedger() *MemoryLedger { return &MemoryLedger{} }

func (l *MemoryLedger) room(id string) *memoryRoom {
	if l.rooms == nil {
		l.rooms = make(map[string]*memoryRoom)
	}
	r := l.rooms[id]
	if r == nil {
		r = &memoryRoom{keys: make(map[string]KeyState), acks: make(map[string]bool), steps: make(map[stepID][]byte)}
		l.rooms[id] = r
	}
	return r
}

// Key implements Ledger.
func (l *MemoryLedger) Key(_ context.Context, room, key string) (KeyState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.room(room).keys[key], nil
}

// SetKey implements Ledger.
func (l *MemoryLedger) SetKey(_ context.Context, room, key string, state KeyState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.room(room)
	if _, seen := r.keys[key]; !seen {
		r.order = append(r.order, key)
	}
	r.keys[key] = state
	for len(r.order) > l.limit() {
		delete(r.keys, r.order[0])
		r.order = r.order[1:]
	}
	return nil
}

func (l *MemoryLedger) limit() int {
	if l.MaxKeysPerRoom <= 0 {
		return 10000
	}
	return l.MaxKeysPerRoom
}

// AckPending implements Ledger.
func (l *MemoryLedger) AckPending(_ context.Context, room, messageID string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.room(room).acks[messageID], nil
}

// SetAckPending implements Ledger.
func (l *MemoryLedger) SetAckPending(_ context.Context, room, messageID string, pending bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pending {
		l.room(room).acks[messageID] = true
	} else {
		delete(l.room(room).acks, messageID)
	}
	return nil
}

// Step implements Ledger.
func (l *MemoryLedger) Step(_ context.Context, room, messageID, name string) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	result, ok := l.room(room).steps[stepID{messageID, name}]
	return bytes.Clone(result), ok, nil
}

// SetStep implements Ledger.
func (l *MemoryLedger) SetStep(_ context.Context, room, messageID, name string, result []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.room(room)
	id := stepID{messageID, name}
	if _, seen := r.steps[id]; !seen {
		r.stepOrder = append(r.stepOrder, id)
	}
	r.steps[id] = bytes.Clone(result)
	for len(r.stepOrder) > l.limit() {
		delete(r.steps, r.stepOrder[0])
		r.stepOrder = r.stepOrder[1:]
	}
	return nil
}

// Durable implements Ledger: a MemoryLedger forgets everything on a crash.
func (l *MemoryLedger) Durable() bool { return false }
