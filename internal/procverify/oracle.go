package procverify

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
)

// Invariant names one rule the oracle judges.
type Invariant string

// The rules, judged from the fake's ground truth and what the proxies saw
// the agent send, never from the agent's own account. Invariants lists
// them in the order they are judged; the first that fails is the
// schedule's verdict.
const (
	// Fenced: with replicas, a replica sends nothing to Band (beyond GET
	// /agent/me) once another replica took over from it, until that one
	// is gone (killed, exited, handed over, paused): a request sent by a
	// fenced holder.
	Fenced Invariant = "fenced"
	// NoDoublePost: at most one reply per dedup marker in a room, and at
	// most one reply per message (see attribution in the docs).
	NoDoublePost Invariant = "no-double-post"
	// NoDoubleWrite: at most one memory, task, task comment and created
	// room per key (oracle.DoubleWrites), the writes of Band's agent API
	// an agent makes besides its posts.
	NoDoubleWrite Invariant = "no-double-write"
	// AgentLifecycle: the agent runs until it is killed, superseded or
	// terminated; it never exits on its own.
	AgentLifecycle Invariant = "agent-lifecycle"
	// SupersedeExit: a superseded process sends nothing more once the
	// push reached it, and exits within the grace (non-zero, with
	// Settings.SupersedeExitCode).
	SupersedeExit Invariant = "supersede"
	// NonePending: every message ends processed.
	NonePending Invariant = "none-pending"
	// OneOutcome: every message ends in one outcome: processed after its
	// one reply, or processed without one when an interrupt cut its turn;
	// no reply answers no message.
	OneOutcome Invariant = "one-outcome"
	// InterruptSilence: nothing is sent for an interrupted turn once the
	// interrupt reached the agent.
	InterruptSilence Invariant = "interrupt-silence"
	// StopSilence: once a stop reached the agent, it neither replies nor
	// claims a message in that room until play, and the turn it stopped
	// is left for replay, not consumed.
	StopSilence Invariant = "stop-silence"
	// TermExit: SIGTERM at the end makes the process exit 0 within the
	// grace.
	TermExit Invariant = "sigterm"
	// Quiet: the system goes quiet (every message processed, nothing
	// sent) before the schedule's deadline.
	Quiet Invariant = "quiet"
)

// Invariants is every rule, in judging order.
var Invariants = []Invariant{Fenced, NoDoublePost, NoDoubleWrite, AgentLifecycle, SupersedeExit, NonePending, OneOutcome, InterruptSilence, StopSilence, TermExit, Quiet}

// Violation is a rule that failed, with a one-clause reason.
type Violation struct {
	Invariant Invariant
	Reason    string
}

func (v *Violation) Error() string { return string(v.Invariant) + ": " + v.Reason }

// Result is the verdict on one schedule and what it exercised.
type Result struct {
	Schedule *Schedule
	// Violation is the first rule that failed, or nil; Found holds the
	// first violation of every rule that failed.
	Violation *Violation
	Found     map[Invariant]*Violation
	// Checks and Violations count the cases judged and failed per rule.
	Checks, Violations map[Invariant]int
	// Faults counts what fired, not merely what was drawn.
	Faults map[string]int
	// Totals from the fake's ground truth and the engine.
	Messages, Replies, Requests, Lives int
	DoublePosts, Lost, Interrupted     int
	// NotExercised says what the schedule could not exercise, and why.
	NotExercised []string
	// Sockets: some life of the agent opened its socket.
	Sockets bool
	// Output is the last lines the agent's last life wrote.
	Output []string
	// Failovers are the changes of holder after the holder went, with
	// replicas.
	Failovers []Failover
	// Wall is how long the schedule took.
	Wall time.Duration
	// Err is set when the schedule could not be run at all.
	Err error
}

// truth is everything the oracle reads, gathered once.
type truth struct {
	s        *sim
	controls []control
	attempts []attempt
	posts    [][]fakeband.Post          // the agent's replies, by room
	marks    map[string][]fakeband.Mark // by message id
	answers  map[string][]fakeband.Post // replies attributed to each message
	sends    map[string][]fakeband.Post // each message's turn's other messages (m.Send)
	orphans  [][]fakeband.Post          // replies that answer no message, by room
	tickOf   map[string]int             // post id -> arrival of the request that made it
	messages []*message
}

// judgement tallies the rules' verdicts on one schedule.
type judgement = oracle.Judgement[Invariant, *Violation]

func newJudgement() *judgement {
	return oracle.NewJudgement(func(inv Invariant, reason string) *Violation {
		return &Violation{Invariant: inv, Reason: reason}
	})
}

// judge runs every rule over the ground truth.
func (s *sim) judge() Result {
	t := s.gather()
	v := newJudgement()
	t.fencedSends(v)
	t.doublePosts(v)
	t.doubleWrites(v)
	t.pending(v)
	t.outcomes(v)
	t.notices(v)
	t.interrupts(v)
	t.stops(v)
	t.superseded(v)
	t.terminated(v)
	v.Check(AgentLifecycle)
	v.Check(Quiet)
	s.mu.Lock()
	failure := s.failure
	notes := make([]string, 0, len(s.notes))
	for n := range s.notes {
		notes = append(notes, n)
	}
	faults := make(map[string]int, len(s.fired))
	for k, n := range s.fired {
		faults[k] = n
	}
	lives := append([]*life(nil), s.lives...)
	failovers := append([]Failover(nil), s.failovers...)
	s.mu.Unlock()
	if failure != nil {
		v.Check(failure.Invariant)
		v.Fail(failure.Invariant, "%s", failure.Reason)
	}
	sort.Strings(notes)
	res := Result{
		Schedule: s.sched, Violation: v.First(Invariants), Found: v.Found, Checks: v.Checks, Violations: v.Violated,
		Faults: faults, Messages: len(t.messages), Lives: len(lives),
		DoublePosts: v.DoublePosts, Lost: v.Lost, Interrupted: v.Interrupted, NotExercised: notes,
		Failovers: failovers, Wall: time.Since(s.start),
	}
	for _, ps := range t.posts {
		res.Replies += len(ps)
	}
	for _, n := range s.band.Requests() {
		res.Requests += n
	}
	for _, l := range lives {
		l.pushMu.Lock()
		res.Sockets = res.Sockets || l.everSocket
		l.pushMu.Unlock()
	}
	if len(lives) > 0 {
		res.Output = lives[len(lives)-1].out.Lines()
	}
	s.mu.Lock()
	var fencedLife int
	if len(s.fenced) > 0 {
		fencedLife = s.fenced[0].life
	}
	s.mu.Unlock()
	if fencedLife > 0 {
		res.Output = lives[fencedLife-1].out.Lines() // the fenced holder's own account
	}
	return res
}

func (s *sim) gather() *truth {
	s.mu.Lock()
	msgs := append([]*message(nil), s.messages...)
	t := &truth{s: s, marks: map[string][]fakeband.Mark{}, answers: map[string][]fakeband.Post{}, sends: map[string][]fakeband.Post{}, tickOf: map[string]int{}, messages: msgs}
	for _, a := range s.attempts {
		t.attempts = append(t.attempts, *a)
	}
	for _, c := range s.controls {
		t.controls = append(t.controls, *c)
	}
	s.mu.Unlock()
	said := map[string]int{}
	for range s.rooms {
		t.posts = append(t.posts, nil)
		t.orphans = append(t.orphans, nil)
	}
	for i, r := range s.rooms {
		for _, p := range s.band.Posts(r.ID) {
			if p.SenderID != s.agent.ID {
				said[p.ID] = p.Seq
				continue
			}
			t.posts[i] = append(t.posts[i], p)
		}
	}
	for _, m := range msgs {
		m.Seq = said[m.ID]
		t.marks[m.ID] = s.band.Marks(s.agent.ID, m.ID)
	}
	for _, a := range t.attempts {
		if a.PostID != "" {
			t.tickOf[a.PostID] = a.Tick
		}
	}
	for room, ps := range t.posts {
		for _, p := range ps {
			if m := t.turnSend(room, p); m != nil {
				// A message of a turn besides its reply (m.Send): not
				// its answer, but silenced by an interrupt all the same.
				t.sends[m.ID] = append(t.sends[m.ID], p)
				continue
			}
			if m := t.attribute(room, p); m != nil {
				t.answers[m.ID] = append(t.answers[m.ID], p)
			} else {
				t.orphans[room] = append(t.orphans[room], p)
			}
		}
	}
	return t
}

// turnSend reports whether p is one of a turn's messages besides its
// reply: its marker's key is under a message's default key
// ("msg:<id>:send:1", band-once's Message.Send), which names a unit of
// work of that message other than its answer. It is neither the reply
// nor a reply that answers no message; two of it under one key are still
// a double post.
func (t *truth) turnSend(room int, p fakeband.Post) *message {
	key, ok := oracle.MarkerKey(p.Content)
	if !ok {
		return nil
	}
	for _, m := range t.messages {
		if m.Room == room && strings.HasPrefix(key, "msg:"+m.ID+":") {
			return m
		}
	}
	return nil
}

// attribute finds the message a reply answers: the message of the room
// whose id its dedup marker's key names; failing that, the message of
// the room whose attempt the agent opened last before the reply was
// stored. nil if neither finds one.
func (t *truth) attribute(room int, p fakeband.Post) *message {
	if key, ok := oracle.MarkerKey(p.Content); ok {
		for _, m := range t.messages {
			if m.Room == room && strings.Contains(key, m.ID) {
				return m
			}
		}
	}
	var best *message
	bestSeq := 0
	for _, m := range t.messages {
		if m.Room != room {
			continue
		}
		for _, mk := range t.marks[m.ID] {
			if mk.Kind == fakeband.StatusProcessing && mk.Seq < p.Seq && mk.Seq > bestSeq {
				best, bestSeq = m, mk.Seq
			}
		}
	}
	return best
}

// fencedSends judges the rule Fenced: one case per change of holder and per
// request of a replica taken over from, failed by the latter.
func (t *truth) fencedSends(v *judgement) {
	s := t.s
	s.mu.Lock()
	takeovers, sends := s.takeovers, slices.Clone(s.fenced)
	s.mu.Unlock()
	if !s.replicas() {
		return
	}
	for range takeovers {
		v.Check(Fenced)
	}
	for _, f := range sends {
		v.Fail(Fenced, "replica life %d (pid %d) sent %s after life %d had taken over from it", f.life, f.pid, f.what, f.by)
	}
}

func (t *truth) doublePosts(v *judgement) {
	for room, ps := range t.posts {
		byKey := map[string][]fakeband.Post{}
		var keys []string
		for _, p := range ps {
			if key, ok := oracle.MarkerKey(p.Content); ok {
				if byKey[key] == nil {
					keys = append(keys, key)
				}
				byKey[key] = append(byKey[key], p)
			}
		}
		for _, key := range keys {
			v.Check(NoDoublePost)
			if n := len(byKey[key]); n > 1 {
				v.DoublePosts += n - 1
				v.Fail(NoDoublePost, "room %d got %d replies with dedup key %q", room+1, n, key)
			}
		}
	}
	for _, m := range t.messages {
		v.Check(NoDoublePost)
		if n := len(t.answers[m.ID]); n > 1 && !sameMarker(t.answers[m.ID]) {
			v.DoublePosts += n - 1
			v.Fail(NoDoublePost, "%s got %d replies", m.Label, n)
		}
	}
}

// doubleWrites judges the agent's memories, tasks, comments and created
// rooms, one check per write.
func (t *truth) doubleWrites(v *judgement) {
	s := t.s
	var tasks []fakeband.Task
	for _, r := range s.rooms {
		tasks = append(tasks, s.band.Tasks(r.ID)...)
	}
	var created []string
	for _, r := range s.band.CreatedRooms() {
		if r.OwnerID == s.agent.ID {
			created = append(created, r.Title)
		}
	}
	memories := s.band.Memories()
	writes := len(created)
	for _, m := range memories {
		if m.SourceAgentID == s.agent.ID {
			writes++
		}
	}
	for _, task := range tasks {
		writes += len(task.Comments)
		if task.CreatorID == s.agent.ID {
			writes++
		}
	}
	for range writes {
		v.Check(NoDoubleWrite)
	}
	for _, d := range oracle.DoubleWrites(s.agent.ID, memories, tasks, created) {
		v.Fail(NoDoubleWrite, "a %s written twice under key %q (%q)", d.Kind, d.Key, d.Text)
	}
}

// sameMarker reports whether the posts all carry one marker (counted
// already, by key).
func sameMarker(ps []fakeband.Post) bool {
	first, ok := oracle.MarkerKey(ps[0].Content)
	if !ok {
		return false
	}
	for _, p := range ps[1:] {
		if k, ok := oracle.MarkerKey(p.Content); !ok || k != first {
			return false
		}
	}
	return true
}

func (t *truth) pending(v *judgement) {
	for _, m := range t.messages {
		v.Check(NonePending)
		if st := t.s.band.Status(t.s.agent.ID, m.ID); st != fakeband.StatusProcessed {
			v.Lost++
			v.Fail(NonePending, "%s was left %q", m.Label, st)
		}
	}
}

func (t *truth) processedSeq(id string) int { return oracle.ProcessedSeq(t.marks[id]) }

func (t *truth) failedBefore(id string, seq int) (string, bool) {
	return oracle.FailedBefore(t.marks[id], seq)
}

// windowStart is where the message's turn can have begun: after it was
// said and after the room's previous message was processed.
func (t *truth) windowStart(m *message, done int) int {
	var processed []int
	for _, o := range t.messages {
		if o.Room == m.Room && o.ID != m.ID {
			processed = append(processed, t.processedSeq(o.ID))
		}
	}
	return oracle.WindowStart(m.Seq, done, processed)
}

// interruptedIn reports whether a delivered interrupt falls inside a
// message's turn, from its start to its processed mark: consuming the
// message without a reply is then what the interrupt asked for.
func (t *truth) interruptedIn(room, from, to int) bool {
	for _, c := range t.controls {
		if c.Kind == Interrupt && c.Room == room && c.Delivered && c.Seq < to && c.UntilSeq >= from {
			return true
		}
	}
	return false
}

func (t *truth) outcomes(v *judgement) {
	// A life that saw its reply posted and then marked the message failed
	// made a failed acknowledgement into a failure (oracle.FailedAfterReply,
	// as package verify judges it).
	answerOf := map[string]string{} // post id: the message it answers
	for id, ps := range t.answers {
		for _, p := range ps {
			answerOf[p.ID] = id
		}
	}
	var seen []oracle.Sighting
	for _, a := range t.attempts {
		switch {
		case a.EP == fakeband.EndpointPost && a.Answered && a.Status/100 == 2 && answerOf[a.PostID] != "":
			seen = append(seen, oracle.Sighting{Life: a.Life, Msg: answerOf[a.PostID], Replied: true})
		case a.EP == fakeband.EndpointFailed:
			seen = append(seen, oracle.Sighting{Life: a.Life, Msg: a.Msg, Failed: true})
		}
	}
	failed := map[string]bool{}
	for _, id := range oracle.FailedAfterReply(seen) {
		failed[id] = true
	}
	for room, ps := range t.orphans {
		for _, p := range ps {
			v.Check(OneOutcome)
			v.Fail(OneOutcome, "room %d got a reply that answers no message: %.60q", room+1, firstLine(p.Content))
		}
	}
	for _, m := range t.messages {
		done := t.processedSeq(m.ID)
		if done == 0 {
			continue // none-pending has it
		}
		v.Check(OneOutcome)
		answers := t.answers[m.ID]
		switch {
		case len(answers) > 0 && answers[0].Seq > done:
			v.Fail(OneOutcome, "%s was marked processed before its reply was posted", m.Label)
		case failed[m.ID]:
			v.Fail(OneOutcome, "a failed acknowledgement became a failure: %s was marked failed after its reply was posted", m.Label)
		case len(answers) > 0:
		case t.interruptedIn(m.Room, t.windowStart(m, done), done):
			v.Interrupted++
		case t.s.cfg.MayNotReply:
		default:
			v.Lost++
			if reason, failed := t.failedBefore(m.ID, done); failed {
				v.Fail(OneOutcome, "%s was given up on without a reply (marked failed: %.60q)", m.Label, reason)
			} else {
				v.Fail(OneOutcome, "%s was processed without a reply (lost)", m.Label)
			}
		}
	}
}

// newTurn reports whether the claim of m between the interrupt c and the
// reply p opened a turn the interrupt does not cover: a claim by another
// life (a crash forgets the interrupt), or a life that never saw a claim
// of m answered before the interrupt reached it (its turn had not begun:
// a lost answer to the claim loses the interrupt with it). The life that
// held the turn and heard the interrupt must consume the message, not
// claim it again and answer it.
func (t *truth) newTurn(c control, m *message, p fakeband.Post) bool {
	sent := t.tickOf[p.ID]
	heard := 0 // the life that heard it: the latest to send before it took effect
	for _, a := range t.attempts {
		if a.Tick <= c.Effective {
			heard = a.Life
		}
	}
	// A stop that reached the agent after its claim and before the
	// interrupt ended that turn (left for replay): the interrupt found
	// none in flight, and is a no-op (control-semantics 1.4).
	stopped := 0
	for _, s := range t.controls {
		if s.Kind == Stop && s.Delivered && s.Room == c.Room && s.Effective <= c.Effective && s.Effective > stopped {
			stopped = s.Effective
		}
	}
	held := false
	for _, a := range t.attempts {
		if a.EP != fakeband.EndpointProcessing || a.Msg != m.ID {
			continue
		}
		switch {
		case a.Life != heard && a.Tick > c.Effective && a.Tick < sent:
			return true
		case a.Life == heard && a.Tick <= c.Effective && a.Tick > stopped && a.Answered && a.Status/100 == 2:
			held = true
		}
	}
	return !held
}

// openAt returns the room's message whose attempt was open at seq.
func (t *truth) openAt(room, seq int) *message {
	for _, m := range t.messages {
		if m.Room == room && oracle.OpenAt(t.marks[m.ID], seq) {
			return m
		}
	}
	return nil
}

func (t *truth) messageByID(id string) *message {
	for _, m := range t.messages {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// target is the message a signal cut: the held request's, or the one
// whose attempt was open when it was sent.
func (t *truth) target(c control) *message {
	if m := t.messageByID(c.Message); m != nil {
		return m
	}
	return t.openAt(c.Room, c.Seq)
}

func (t *truth) interrupts(v *judgement) {
	for _, c := range t.controls {
		if c.Kind != Interrupt || !c.Delivered {
			continue
		}
		v.Check(InterruptSilence)
		m := t.target(c)
		if m == nil {
			continue
		}
		for _, p := range append(append([]fakeband.Post(nil), t.answers[m.ID]...), t.sends[m.ID]...) {
			if t.tickOf[p.ID] <= c.Effective || (oracle.ClaimedBetween(t.marks[m.ID], c.Seq, p.Seq) && t.newTurn(c, m, p)) {
				continue
			}
			v.Fail(InterruptSilence, "%s's reply was sent after the interrupt reached the agent", m.Label)
		}
	}
}

func (t *truth) stops(v *judgement) {
	for _, c := range t.controls {
		if c.Kind != Stop || !c.Delivered {
			continue
		}
		v.Check(StopSilence)
		roomID := t.s.rooms[c.Room].ID
		until := c.PlayTick
		if until == 0 {
			until = int(^uint(0) >> 1)
		}
		for _, a := range t.attempts {
			if a.Room != roomID || a.Tick <= c.Effective || a.Tick >= until {
				continue
			}
			switch a.EP {
			case fakeband.EndpointPost:
				v.Fail(StopSilence, "the agent sent a reply in room %d after its stop reached it, before play", c.Room+1)
			case fakeband.EndpointProcessing:
				v.Fail(StopSilence, "the agent claimed %s in room %d after its stop reached it, before play", t.label(a.Msg), c.Room+1)
			case fakeband.EndpointProcessed, fakeband.EndpointFailed:
				if m := t.target(c); c.Held && m != nil && a.Msg == m.ID {
					v.Fail(StopSilence, "the agent consumed %s after its stop reached it; a stop leaves the turn for replay", m.Label)
				}
			}
		}
	}
}

func (t *truth) label(id string) string {
	if m := t.messageByID(id); m != nil {
		return m.Label
	}
	return "a message"
}

func (t *truth) superseded(v *judgement) {
	t.s.mu.Lock()
	lives := append([]*life(nil), t.s.lives...)
	t.s.mu.Unlock()
	for _, l := range lives {
		l.mu.Lock()
		tick := l.supersedeTick
		l.mu.Unlock()
		if tick == 0 {
			continue
		}
		v.Check(SupersedeExit)
		for _, a := range t.attempts {
			if a.Life == l.n && a.Tick > tick && (mutating(a.EP) || a.EP == fakeband.EndpointSocket) {
				v.Fail(SupersedeExit, "the agent (life %d) sent %s after it was superseded", l.n, endpointNames[a.EP])
				break
			}
		}
	}
}

func (t *truth) terminated(v *judgement) {
	t.s.mu.Lock()
	lives := append([]*life(nil), t.s.lives...)
	t.s.mu.Unlock()
	for _, l := range lives {
		l.mu.Lock()
		termAt, killed, exit, took := l.termAt, l.termKilled, l.termExit, l.termTook
		l.mu.Unlock()
		if termAt.IsZero() {
			continue
		}
		v.Check(TermExit)
		switch {
		case killed:
			v.Fail(TermExit, "the agent was still running %s after SIGTERM", took.Truncate(time.Millisecond))
		case exit != "exit status 0":
			v.Fail(TermExit, "the agent ended with %q after SIGTERM; want exit 0", exit)
		}
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
