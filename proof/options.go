package proof

import (
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Budget is the handler-failure budget the prover gives its Shell
// (Config.MaxAttempts), draws failures under and judges dead letters by:
// smaller than the Shell's default, so that schedules reach it.
const Budget = 3

// Options configure the engine. The zero value runs the prover's own
// Shell agent with a fresh MemoryLedger per life.
type Options struct {
	// Agent builds the agent factory for one schedule, and a cleanup to
	// run when the schedule is over (nil for none). Nil means
	// ShellAgent(ShellConfig{}).
	Agent func(*Schedule) (Factory, func())
	// MaxAttempts is the handler-failure budget the agent dead-letters
	// at; the oracle uses it to tell a fair dead letter from an abort
	// that was charged. Zero means Budget, which the prover's Shell is
	// given too.
	MaxAttempts int
	// KeyOf is the dedup key the agent's reply to a message carries.
	// Nil means the spec's Key, or bandonce.DefaultKey of the message id.
	KeyOf func(messageID string, spec MessageSpec) string
	// Trace, if set, receives one line per step of the run: releases,
	// events, kills and lives. For debugging and -v.
	Trace func(line string)
	// Checks are more invariants, judged after the built-in ones, in
	// order, from the result (its Effects and Starts included).
	Checks []CustomCheck
	// TurnEffect reports whether an agent post's dedup key belongs to a
	// message a handler sent while it ran (bandonce.Message.Send), not to
	// a reply. Such a post answers no message: it is judged by
	// no-double-post alone. Nil means every post is a reply.
	TurnEffect func(key string) bool
	// RepliesOptional accepts a message whose spec says Reply ending
	// processed with no reply, for agents that may consume a message
	// silently. Every other rule stands: at most one reply per key, none
	// after its message was marked processed, nothing sent after an
	// interrupt reached the agent, nothing pending.
	RepliesOptional bool
	// DeadLettersTold requires the room of every dead-lettered message to
	// be told with exactly one error event under bandonce.NoticeKey, as
	// the Shell does by default. Whatever it says, an error event under
	// that key for a message that was answered, or two, are violations.
	// The built-in agent (a nil Agent) sets it.
	DeadLettersTold bool
	// HandlersCut requires a handler that a stop or an interrupt reached
	// running to end within a second of the signal's push (stop-silence,
	// interrupt-silence), for agents whose handlers make no requests of
	// their own, such as the Shell running SpecHandler: one waiting on
	// its own send would need longer (package verify judges that by a
	// rule of its own). The built-in agent (a nil Agent) sets it.
	HandlersCut bool
	// Busy, if set, reports whether the agent was working on a turn in
	// the room (by id) in life at tick (see External.Tick) in a way the
	// engine cannot see, such as a call to the outside world in flight.
	// The oracle asks it when it judges whether an interrupt found a turn
	// in flight (InterruptConsumes).
	Busy func(life int, room string, tick int64) bool
	// LeaseTime is the replicas' lease length (Schedule.Replicas), which
	// bounds a failover after the holder's death. Zero means
	// DefaultLeaseTime.
	LeaseTime time.Duration
}

// CustomCheck is one more invariant for Options.Checks, such as "no side
// effect performed twice for one natural key".
type CustomCheck struct {
	// Name names the invariant in counts, reports and shrinking.
	Name Invariant
	// Judge returns why the schedule broke the invariant, or "" if it
	// held.
	Judge func(Result) string
}

func (o Options) withDefaults() Options {
	if o.Agent == nil {
		single, replicas := ShellAgent(ShellConfig{}), ReplicaAgent(ReplicaConfig{LeaseTime: o.LeaseTime})
		o.Agent = func(s *Schedule) (Factory, func()) {
			if s.Replicas >= 2 {
				return replicas(s)
			}
			return single(s)
		}
		o.DeadLettersTold, o.HandlersCut = true, true
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = Budget
	}
	if o.KeyOf == nil {
		o.KeyOf = func(id string, spec MessageSpec) string {
			if spec.Key != "" {
				return spec.Key
			}
			return bandonce.DefaultKey(id)
		}
	}
	return o
}

// Result is the verdict on one schedule, with what it exercised.
type Result struct {
	// Schedule is the schedule judged.
	Schedule *Schedule
	// Violation is the first invariant that failed, or nil.
	Violation *Violation
	// Found holds, for every invariant that failed, its first violation.
	Found map[Invariant]*Violation
	// Checks counts, per invariant, the cases judged; Violations the
	// cases that failed.
	Checks, Violations map[Invariant]int
	// DoublePosts counts replies beyond the first for a key; Lost the
	// messages left pending or processed without their due reply.
	DoublePosts, Lost int
	// Interrupted counts the messages whose reply was due but which an
	// interrupt that reached their turn consumed first: not lost, since
	// consuming is what an interrupt asks for.
	Interrupted int
	// Faults counts the faults and control actions that fired.
	Faults map[string]int
	// Messages, Replies and Requests are totals from the fake's ground
	// truth; Lives is how many times the agent was started.
	Messages, Replies, Requests, Lives int
	// Posts are the agent's posts, and Events its events, by room (the
	// schedule's room order), oldest first, as the fake stored them.
	Posts  [][]fakeband.Post
	Events [][]fakeband.ChatEvent
	// Memories are the memories stored, in order; Tasks the tasks of each
	// room's board (the schedule's room order) with their comments; and
	// CreatedRooms the titles of the rooms the agent created, in order:
	// the writes of Band's agent API, as the fake stored them.
	Memories     []fakeband.Memory
	Tasks        [][]fakeband.Task
	CreatedRooms []string
	// AgentID is the participant id of the agent judged.
	AgentID string
	// Effects counts the side effects the agent performed through
	// External, by natural key; Starts lists its handler starts.
	Effects map[string]int
	Starts  []HandlerStart
	// Released is how many requests the gate released or killed: the
	// schedule's request-index space.
	Released int
	// QuietAt is the request count when the system first went quiet
	// with every event fired: the lifecycle's request sequence.
	QuietAt int
	// StallAt is the request count when the system first stalled (no
	// mark or post for stallAfter, not quiet) with every event fired, or
	// 0: a request-bound event still pending then would have been fired
	// at that moment instead of at its request (kill_idle for a kill).
	StallAt int
	// Signals are the interrupts, stops and plays the engine sent, and
	// the supersedes that reached the agent, with whether and when each
	// reached it.
	Signals []Signal
	// Said are the humans' messages, in the order they were said.
	Said []Said
	// Sockets counts the socket upgrades the agent asked for, over all
	// its lives: zero for an agent that never tries to listen.
	Sockets int
	// Failovers are the takeovers timed in a schedule with replicas.
	Failovers []Failover
}

// Signal is one control signal and whether it reached the agent: the
// agent read its push from its socket. Late and lost pushes reach it
// late or never; a push to an agent with no socket never does.
type Signal struct {
	// Kind is Interrupt, Stop, Play or Supersede.
	Kind EventKind
	// RoomID is the room it is for; "" for an agent-wide interrupt and
	// for a supersede.
	RoomID string
	// Reached: the agent read the push, in Life, at At (virtual time);
	// Tick orders that among what else the engine saw (External.Tick).
	Reached bool
	Life    int
	At      time.Time
	Tick    int64
}

// Said is one message a human said.
type Said struct {
	// ID is the message's id, RoomID its room's; Label names it in
	// reports ("r1m2"), whatever its text.
	ID, RoomID, Label string
}
