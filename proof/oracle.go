package proof

import (
	"slices"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
)

// Invariant names one property the oracle checks.
type Invariant string

// The invariants, judged from the fake's ground truth after the system
// went quiet. Invariants lists them in the order they are judged.
const (
	// NoDoublePost: no dedup key is posted twice in a room.
	NoDoublePost Invariant = "no-double-post"
	// NonePending: every message ends processed.
	NonePending Invariant = "none-pending"
	// OneOutcome: every message ends in exactly one outcome: processed
	// after its one reply; processed without a reply when none was due,
	// an interrupt came first, or its key was already posted; or
	// dead-lettered (failed with a reason, then processed, no reply). No
	// post answers no message.
	OneOutcome Invariant = "one-outcome"
	// AbortsUncharged: a message drawn to succeed after fewer failures
	// than the budget is never dead-lettered, whatever interrupts, stops
	// and kills it met.
	AbortsUncharged Invariant = "aborts-uncharged"
	// InterruptSilence: nothing is sent for an interrupted cycle after
	// the signal reached the agent, and a handler it reached running ends
	// within cutGrace.
	InterruptSilence Invariant = "interrupt-silence"
	// InterruptConsumes: a message whose turn an interrupt reached is
	// consumed by the shell that heard it: that shell (the life, or with
	// replicas its lease term) does not run its handler again, post its
	// reply or mark it failed.
	InterruptConsumes Invariant = "interrupt-consumes"
	// StopSilence: no handler starts in a room between a stop that
	// reached the agent and the room's play, and a handler it reached
	// running ends within cutGrace.
	StopSilence Invariant = "stop-silence"
	// SupersedeStops: an agent the supersede reached starts no new work
	// (no claim, no reply, no socket) and returns within 10s.
	SupersedeStops Invariant = "supersede-stops"
	// AgentLifecycle: the agent runs until its context ends and returns
	// soon after.
	AgentLifecycle Invariant = "agent-lifecycle"
	// Quiet: the system goes quiet (every message processed, nothing in
	// flight) before the schedule's virtual deadline.
	Quiet Invariant = "quiet"
	// FencedSend (replicas only): every request to Band leaves a replica
	// that leads under the latest lease epoch: none from a standby, none
	// from a holder another replica has taken over from.
	FencedSend Invariant = "fenced-send"
	// FailoverBound (replicas only): after the holder's death a replica
	// leading under a later epoch sends to Band within the lease (and a
	// poll); after a graceful hand-over, within a second.
	FailoverBound Invariant = "failover-bound"
)

// ReplicaInvariants are judged, after Invariants, in schedules with
// replicas only; a receipt lists them when it ran such schedules.
var ReplicaInvariants = []Invariant{FencedSend, FailoverBound}

// Invariants is every invariant, in the order the oracle judges them.
var Invariants = []Invariant{NoDoublePost, NonePending, OneOutcome, AbortsUncharged, InterruptSilence, InterruptConsumes, StopSilence, SupersedeStops, AgentLifecycle, Quiet}

// Violation is an invariant that failed, with a one-clause reason.
type Violation struct {
	Invariant Invariant
	Reason    string
}

// Error reads "invariant: reason".
func (v *Violation) Error() string { return string(v.Invariant) + ": " + v.Reason }

// judgement collects check counts and keeps the first violation in judging
// order.
type judgement = oracle.Judgement[Invariant, *Violation]

func newJudgement() *judgement {
	return oracle.NewJudgement(func(inv Invariant, reason string) *Violation {
		return &Violation{Invariant: inv, Reason: reason}
	})
}

// judge runs every invariant over the ground truth.
func (s *sim) judge() Result {
	t := s.gather()
	v := newJudgement()
	t.doublePosts(v)
	t.pending(v)
	t.outcomes(v)
	t.notices(v)
	t.interrupts(v)
	t.interruptsConsume(v)
	t.stops(v)
	t.superseded(v)
	var failovers []Failover
	if s.reps != nil {
		failovers = s.reps.judge(v)
	}
	v.Check(AgentLifecycle)
	v.Check(Quiet)
	if s.failure != nil {
		v.Fail(s.failure.Invariant, "%s", s.failure.Reason)
	}
	res := Result{
		Schedule: s.sched, Violation: v.First(slices.Concat(Invariants, ReplicaInvariants)), Found: v.Found, Checks: v.Checks, Violations: v.Violated, Faults: s.firedFaults(),
		DoublePosts: v.DoublePosts, Lost: v.Lost, Interrupted: v.Interrupted,
		Messages: len(s.messages), Lives: s.lives, Released: s.released, QuietAt: s.quietAt, StallAt: s.stallAt,
		Signals: s.signals(), Said: s.said(), Posts: t.posts, Failovers: failovers,
	}
	for _, r := range s.rooms {
		res.Events = append(res.Events, s.band.ChatEvents(r.ID))
		res.Tasks = append(res.Tasks, s.band.Tasks(r.ID))
	}
	res.Memories, res.AgentID = s.band.Memories(), s.agent.ID
	for _, r := range s.band.CreatedRooms() {
		if r.OwnerID == s.agent.ID {
			res.CreatedRooms = append(res.CreatedRooms, r.Title)
		}
	}
	for _, l := range s.allLives {
		res.Sockets += int(l.sockets.Load())
	}
	if s.busy {
		// A busy loop cut the run short: what it left pending says
		// nothing more.
		res.Violation = v.Found[s.failure.Invariant]
	}
	for _, ps := range t.posts {
		res.Replies += len(ps)
	}
	for _, n := range s.band.Requests() {
		res.Requests += n
	}
	res.Starts, res.Effects = s.world.snapshot()
	for _, c := range s.opts.Checks {
		res.Checks[c.Name]++
		if reason := c.Judge(res); reason != "" {
			res.Violations[c.Name]++
			if res.Found[c.Name] == nil {
				res.Found[c.Name] = &Violation{Invariant: c.Name, Reason: reason}
			}
			if res.Violation == nil {
				res.Violation = res.Found[c.Name]
			}
		}
	}
	return res
}

func (t *truth) doublePosts(v *judgement) {
	for room, keys := range t.byKey {
		for key, posts := range keys {
			v.Check(NoDoublePost)
			if key != "" && len(posts) > 1 {
				v.DoublePosts += len(posts) - 1
				v.Fail(NoDoublePost, "room %d got %d replies with key %q (%s)", room+1, len(posts), key, t.label(room, key))
			}
		}
	}
}

func (t *truth) pending(v *judgement) {
	for _, m := range t.s.messages {
		v.Check(NonePending)
		if st := t.s.band.Status(t.s.agent.ID, m.ID); st != fakeband.StatusProcessed {
			v.Lost++
			v.Fail(NonePending, "%s was left %q", m.Spec.Label, st)
		}
	}
}

func (t *truth) outcomes(v *judgement) {
	for room, keys := range t.byKey {
		for key, posts := range keys {
			if t.repliers[room][key] == 0 && len(t.messagesWithKey(room, key)) == 0 && !t.turnEffect(key) {
				v.Check(OneOutcome)
				v.Fail(OneOutcome, "room %d got a post that answers no message (key %q): %.60q", room+1, key, posts[0].Content)
			}
		}
	}
	for _, m := range t.s.messages {
		done := t.processedSeq(m.ID)
		if done == 0 {
			continue // none-pending has it
		}
		v.Check(OneOutcome)
		key := t.keyOf[m.ID]
		posts := t.byKey[m.Room][key]
		excused := t.interruptedIn(m.Room, t.windowStart(m, done), done)
		switch {
		case m.Spec.Outcome.repliesEventually() && m.Spec.Fails < t.s.opts.MaxAttempts:
			v.Check(AbortsUncharged)
			switch {
			case len(posts) > 0 && posts[0].Seq < done:
			case excused:
				v.Interrupted++
			case len(posts) > 0:
				v.Fail(OneOutcome, "%s was marked processed before its reply was posted", m.Spec.Label)
			case t.s.opts.RepliesOptional && (m.Spec.Fails == 0 || !t.failedBefore(m.ID, done)):
				// The agent may consume a message without answering it.
			case t.failedBefore(m.ID, done):
				v.Lost++
				v.Fail(AbortsUncharged, "%s was dead-lettered though drawn to succeed after %d failure(s)", m.Spec.Label, m.Spec.Fails)
			default:
				v.Lost++
				v.Fail(OneOutcome, "%s was processed without its reply (lost)", m.Spec.Label)
			}
		case m.Spec.Outcome.deadLetters():
			if !excused && !t.failedBefore(m.ID, done) {
				v.Fail(OneOutcome, "%s was consumed without its failure recorded", m.Spec.Label)
			}
			fallthrough
		default:
			if len(posts) > 0 && t.repliers[m.Room][key] == 0 {
				v.Fail(OneOutcome, "%s got a reply though none was due", m.Spec.Label)
			}
		}
	}
}

// turnEffect reports a key the options name as a turn's effect.
func (t *truth) turnEffect(key string) bool {
	return key != "" && t.s.opts.TurnEffect != nil && t.s.opts.TurnEffect(key)
}

func (t *truth) interrupts(v *judgement) {
	for _, c := range t.s.controls {
		if c.Kind != Interrupt || !c.Delivered {
			continue
		}
		for room := range t.s.rooms {
			if c.Room >= 0 && c.Room != room {
				continue
			}
			v.Check(InterruptSilence)
			m := t.openAt(room, c.Seq)
			if m == nil {
				continue
			}
			key := t.keyOf[m.ID]
			for _, p := range t.byKey[room][key] {
				if p.Seq < c.Seq || t.claimedBetween(room, key, c.Seq, p.Seq) {
					continue
				}
				if sr := t.sendOf(room, p, key); sr != nil && sr.Parked < c.Seq {
					continue // it had left the agent before the signal
				}
				v.Fail(InterruptSilence, "%s's reply was sent after the interrupt reached the agent", m.Spec.Label)
			}
		}
		t.cut(v, InterruptSilence, c, "interrupt")
	}
}

// cutGrace is how long (virtual time) a handler that honours its context
// may run on once a signal that cancels it reached the agent.
const cutGrace = time.Second

// cut fails inv when a handler running in c's room (every room, for an
// agent-wide signal) when c's push reached the agent ran on for more than
// cutGrace: the signal must cut the turn off, not only what it sends.
// Only with Options.HandlersCut, only pushes that arrived at once (they
// have a time), and only schedules without replicas (a replica may be
// paused the moment after it read the push).
func (t *truth) cut(v *judgement, inv Invariant, c *controlRecord, what string) {
	if !t.s.opts.HandlersCut || c.At.IsZero() || t.s.sched.Replicas > 1 {
		return
	}
	for _, st := range t.starts {
		if c.Room >= 0 && st.Room != t.s.rooms[c.Room].ID {
			continue
		}
		if st.Seq < c.Seq && st.Ended != 0 && st.EndedAt.Sub(c.At) > cutGrace {
			v.Fail(inv, "the handler of %s ran %s past the %s that reached it", t.labelOf(st.MessageID), st.EndedAt.Sub(c.At).Round(time.Millisecond), what)
		}
	}
}

func (t *truth) stops(v *judgement) {
	for i, c := range t.s.controls {
		if c.Kind != Stop || !c.Delivered {
			continue
		}
		v.Check(StopSilence)
		play := int(^uint(0) >> 1)
		for _, p := range t.s.controls[i+1:] {
			if p.Kind == Play && p.Room == c.Room {
				play = p.Seq
				break
			}
		}
		roomID := t.s.rooms[c.Room].ID
		for _, st := range t.starts {
			if st.Room == roomID && st.Seq >= c.Seq && st.Seq < play {
				v.Fail(StopSilence, "a handler started on %s in room %d after its stop reached the agent, before play", t.labelOf(st.MessageID), c.Room+1)
			}
		}
		t.cut(v, StopSilence, c, "stop")
	}
}
