package proof

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
)

// Env is what one life of an agent gets. A kill ends the life: its
// HTTPClient fails every request from then on, its sockets drop, and its
// External refuses further effects, as a crashed process would.
type Env struct {
	// HTTPClient reaches the fake Band through the engine's gate. Use it
	// for REST and for the socket upgrade.
	HTTPClient *http.Client
	// BaseURL and SocketURL are the fake's REST root and socket endpoint.
	BaseURL, SocketURL string
	// APIKey and AgentID identify the agent.
	APIKey, AgentID string
	// External is the side-effect double; its records survive kills.
	External *External
	// Life numbers this life from 1; it changes at every kill.
	Life int
	// Seed is a per-life seed for the agent's own randomness (jitter),
	// derived from the schedule's seed so runs replay.
	Seed uint64

	// The rest is for a schedule with replicas (Schedule.Replicas of 2 or
	// more), and zero otherwise.

	// Replica is the replica this life belongs to, from 0.
	Replica int
	// Leading is what the life calls when it starts leading under a lease
	// epoch, and with 0 when it stops: the engine judges every request it
	// sends to Band by it (FencedSend) and times failovers by it.
	Leading func(epoch int64)
	// LedgerCall carries one call to the replicas' shared ledger: op
	// names it (the engine releases calls in the order of their lives and
	// ops, so name a call by what it touches: "set key 1 room key"), call
	// does it. The engine holds a paused life's call until it wakes, and
	// fails it without calling call while the ledger is unreachable or
	// once the life was killed; or it calls call and loses the answer.
	LedgerCall func(ctx context.Context, op string, call func()) error
	// Awake wraps a transport so that a paused life sends nothing new
	// and reads no answer until it wakes. Wrap it around the checks a
	// paused process makes when it wakes (a lease's fence), so that they
	// run after the pause, as they would.
	Awake func(http.RoundTripper) http.RoundTripper
}

// Agent runs one life until ctx ends, then returns. It must return soon
// after ctx ends; an agent that does not is a violation.
type Agent func(ctx context.Context, env Env) error

// Factory builds a fresh Agent for every life, so a kill forgets
// everything the agent kept in memory.
type Factory func() Agent

// ErrLifeEnded is what External returns to a life that was killed: a dead
// process performs no effects.
var ErrLifeEnded = errors.New("proof: this life of the agent was killed")

// External is an agent's window onto the world outside Band: a record of
// handler starts and a counter of side effects by natural key. The
// records survive kills; each life gets its own External, which goes dead
// when the life is killed.
type External struct {
	world *externalWorld
	life  int
	dead  atomic.Bool
}

// HandlerStart is one recorded start of a handler.
type HandlerStart struct {
	// Life is the agent life that started it, in Room on MessageID.
	Life            int
	Room, MessageID string
	// Seq is the fake Band's event sequence number when the handler
	// started: it began after every event with Seq <= this one.
	Seq int
	// Tick orders the start among everything else the engine saw (see
	// External.Tick); Ended, when the handler returned (External.Ended),
	// or 0 if that was never reported.
	Tick, Ended int64
	// EndedAt is when (virtual time) the handler returned, if Ended.
	EndedAt time.Time
}

// externalWorld is the state every life's External shares.
type externalWorld struct {
	mu      sync.Mutex
	stamp   func() int // the fake's current event sequence number
	order   *orderClock
	starts  []HandlerStart
	effects map[string]int
	// kept is the durable ledger the lives share, when it keeps dead
	// letters: the oracle reads it at the end (see deadLettersKept).
	kept bandonce.DeadLetterLedger
}

func newExternalWorld(stamp func() int, order *orderClock) *externalWorld {
	return &externalWorld{stamp: stamp, order: order, effects: make(map[string]int)}
}

func (w *externalWorld) forLife(life int) *External { return &External{world: w, life: life} }

// Started records that a handler started on a message in a room and
// returns how many times a handler has started on it, this time included.
// The engine judges stops against these records.
func (x *External) Started(room, messageID string) (int, error) {
	if x.dead.Load() {
		return 0, ErrLifeEnded
	}
	w := x.world
	seq := w.stamp()
	tick := w.order.next()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.starts = append(w.starts, HandlerStart{Life: x.life, Room: room, MessageID: messageID, Seq: seq, Tick: tick})
	n := 0
	for _, s := range w.starts {
		if s.Room == room && s.MessageID == messageID {
			n++
		}
	}
	return n, nil
}

// Ended records that the handler started on the message in the room
// returned. Together with Started it tells the engine when the handler
// ran, so that a signal that reached the agent meanwhile is known to have
// found the turn in flight. It fails only for a dead life.
func (x *External) Ended(room, messageID string) error {
	if x.dead.Load() {
		return ErrLifeEnded
	}
	w := x.world
	tick := w.order.next()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.starts) - 1; i >= 0; i-- {
		if s := &w.starts[i]; s.Life == x.life && s.Room == room && s.MessageID == messageID {
			if s.Ended == 0 {
				s.Ended, s.EndedAt = tick, time.Now()
			}
			break
		}
	}
	return nil
}

// Effect performs the side effect named by key and returns how many times
// it has been performed, this time included.
func (x *External) Effect(key string) (int, error) {
	if x.dead.Load() {
		return 0, ErrLifeEnded
	}
	w := x.world
	w.mu.Lock()
	defer w.mu.Unlock()
	w.effects[key]++
	return w.effects[key], nil
}

// Tick returns the next number of the engine's order of events: every
// request the agent parks and every answer it gets, every control push it
// reads, every handler start takes one. A verifier that takes a tick for
// what it observes can tell which came first, even within one instant of
// virtual time, as Result.Signals are ticked.
func (x *External) Tick() int64 { return x.world.order.next() }

// Count returns how many times the effect named by key was performed.
func (x *External) Count(key string) int {
	w := x.world
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.effects[key]
}

func (w *externalWorld) snapshot() ([]HandlerStart, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	effects := make(map[string]int, len(w.effects))
	for k, v := range w.effects {
		effects[k] = v
	}
	return append([]HandlerStart(nil), w.starts...), effects
}

// keeps tells the oracle which ledger, durable across the schedule's
// kills, keeps the agent's dead letters.
func (x *External) keeps(dl bandonce.DeadLetterLedger) {
	x.world.mu.Lock()
	defer x.world.mu.Unlock()
	x.world.kept = dl
}
