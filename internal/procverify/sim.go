package procverify

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/internal/seedrand"
)

// Real-time limits of one schedule. An agent is a process doing real I/O,
// so unlike the prover these are wall-clock times; they are generous
// where a verdict depends on them (see the docs).
const (
	tick       = 20 * time.Millisecond  // the driver looks around at least this often
	quietFor   = 750 * time.Millisecond // all processed, nothing sent: the verdict may come
	stallAfter = 2 * time.Second        // no mark, post or event for this long: fire the next event
	deadline   = 3 * time.Minute        // the whole schedule, plus Config.Quiet per failure injected
	pushWait   = time.Second            // how long a push may take to pass to the agent's socket
	listenWait = 2 * time.Second        // how long a signal waits for a new life to join its control topic
	// pushReadWait is how long after a push was written to the agent's
	// socket the agent is taken to have read it: only what it sends after
	// that can break a rule about the signal.
	pushReadWait = 250 * time.Millisecond
)

// sim is one schedule in progress against the agent's process.
type sim struct {
	cfg   *settings
	sched *Schedule
	ctx   context.Context
	trace func(string)
	start time.Time

	band     *fakeband.Band
	fakeHost string // host:port the fake listens on, for socket tunnels
	tmp      string // the agent's TMPDIR, the schedule's own
	agent    fakeband.Agent
	human    fakeband.Human
	rooms    []fakeband.Room

	// applyMu serializes requests applied to the fake, so a kill can
	// make sure nothing of a dead life is applied after it.
	applyMu sync.Mutex
	// lifeMu serializes the end of one life and the start of the next.
	lifeMu sync.Mutex

	mu       sync.Mutex
	clock    int // the engine's own order of arrivals and actions
	cursor   int // the current event
	armedAt  time.Time
	skip     int          // matches the current request-bound event still lets pass
	busy     bool         // the current event is being carried out
	early    map[int]bool // later Say events already said while a request-bound event waited
	life     *life
	lives    []*life
	progress time.Time
	lastSend time.Time // the last mark or post that arrived
	inflight int       // REST requests in the proxies now
	// owed counts the failures injected since the last progress, and
	// owedTotal all of them: each excuses one more Config.Quiet of
	// silence, the agent's retry cadence (see excuse).
	owed, owedTotal int

	messages []*message
	controls []*control
	attempts []*attempt
	fired    map[string]int
	notes    map[string]bool // what could not be exercised, and why
	failure  *Violation      // an engine-level violation (lifecycle, quiet)
	wake     chan struct{}

	// With replicas: the schedule's database, how often a replica other
	// than the holder spoke (a change of holder, or a fenced send), the
	// fenced sends, and the failovers timed.
	db        *database
	takeovers int
	fenced    []fencedSend
	failovers []Failover
}

// message is one human message the engine posted.
type message struct {
	ID    string
	Room  int
	Label string
	Seq   int // the fake's seq of its post
}

// control is one interrupt, stop or play the engine sent.
type control struct {
	Kind Kind
	Room int
	// Message is the message whose turn a held signal interrupts or
	// stops: the one whose request's answer was held.
	Message string
	Seq     int // the fake's seq of the action
	// Delivered: the push passed to the agent's socket. Effective is the
	// engine's clock once it had pushReadWait to read it; from then on the
	// agent must honour it.
	Delivered bool
	Effective int
	UntilSeq  int // the fake's seq by then
	Held      bool
	// PlayTick is, for a stop, the engine's clock just before the room's
	// next play (0 if none came).
	PlayTick int
}

// attempt is one request the agent sent, as the proxy saw it.
type attempt struct {
	Life   int
	Tick   int
	EP     fakeband.Endpoint
	Room   string
	Msg    string
	Status int    // the answer's status; 0 if there was none
	PostID string // a reply the fake stored
	// Answered: the answer reached the agent (it did not die, give up,
	// or have the answer taken away first).
	Answered bool
}

func newSim(ctx context.Context, cfg *settings, s *Schedule) (*sim, error) {
	s = s.clone() // an event may be retargeted as it runs (see fireNext)
	sm := &sim{cfg: cfg, sched: s, ctx: ctx, fired: map[string]int{}, notes: map[string]bool{}, wake: make(chan struct{}, 1)}
	sm.trace = func(string) {}
	if cfg.Trace != nil {
		sm.trace = func(line string) {
			cfg.Trace(fmt.Sprintf("[%s seed %d] %7s %s", s.Check, s.Seed, time.Since(sm.start).Truncate(time.Millisecond), line))
		}
	}
	if cfg.Replicas >= 2 {
		db, err := createDatabase(ctx, cfg.Postgres)
		if err != nil {
			return nil, err
		}
		sm.db = db
	}
	// Every run gets ids of its own, though schedules of one seed (of two
	// checks, or a shrink's trials) run side by side: an agent that locks
	// per agent id, as Band's Python SDK does, must not meet itself. And
	// a TMPDIR of its own, for the same reason.
	run := cfg.runs.Add(1)
	sm.band = fakeband.New(fakeband.Options{Seed: fakeSeed(s, run)})
	tmp, err := os.MkdirTemp("", "bandonce-verify-")
	if err != nil {
		sm.close()
		return nil, err
	}
	sm.tmp = tmp
	base, err := sm.band.Listen("127.0.0.1:0")
	if err != nil {
		sm.close()
		return nil, err
	}
	sm.fakeHost = strings.TrimSuffix(strings.TrimPrefix(base, "http://"), fakeband.APIPrefix)
	sm.agent = sm.band.AddAgent("agent")
	sm.human = sm.band.AddHuman("ada")
	for i := range max(s.Rooms, 1) {
		sm.rooms = append(sm.rooms, sm.band.AddRoom(fmt.Sprintf("room %d", i+1), sm.human, sm.agent.ID))
	}
	return sm, nil
}

// fakeSeed is the fake's seed for the run-th schedule run of a
// verification (shrinking trials included): a different one for every
// run, so that no two runs share ids.
func fakeSeed(s *Schedule, run int64) int64 {
	return seedrand.Named(s.Seed, fmt.Sprintf("%s#%d", s.Check, run)).Int64()
}

// close stops the fake, removes the agent's TMPDIR and drops the
// schedule's database, once every life has ended.
func (s *sim) close() {
	_ = s.band.Close()
	if s.tmp != "" {
		_ = os.RemoveAll(s.tmp)
	}
	if s.db != nil {
		if err := s.db.drop(); err != nil {
			s.trace(fmt.Sprintf("could not drop the schedule's database %s: %v", s.db.name, err))
		}
	}
}

// run plays the schedule to its verdict.
func (s *sim) run() (res Result) {
	s.start = time.Now()
	defer s.close()
	for s.cursor < len(s.sched.Events) && s.sched.Events[s.cursor].Kind == Say && s.sched.Events[s.cursor].After == 0 {
		s.apply(s.sched.Events[s.cursor])
		s.advance()
	}
	s.mu.Lock()
	s.progress, s.armedAt = time.Now(), time.Now()
	s.mu.Unlock()
	for range max(s.cfg.Replicas, 1) {
		if err := s.startLife(); err != nil {
			for _, l := range s.lives {
				s.endLife(l, endInterrupted)
			}
			return Result{Schedule: s.sched, Err: err}
		}
	}
	end := time.Now().Add(deadline)
	interrupted := false
	for {
		if s.ctx.Err() != nil {
			interrupted = true
			break
		}
		if !s.step(end) {
			break
		}
		t := time.NewTimer(tick)
		select {
		case <-t.C:
		case <-s.wake:
		case <-s.ctx.Done():
		}
		t.Stop()
	}
	if interrupted {
		// Under lifeMu: a hand-over under way starts its new replica
		// first, or finds its holder ended and starts none.
		s.lifeMu.Lock()
		defer s.lifeMu.Unlock()
		s.mu.Lock()
		lives := append([]*life(nil), s.lives...)
		s.mu.Unlock()
		for _, l := range lives {
			if !l.isDead(s) {
				s.endLife(l, endInterrupted)
			}
		}
		return Result{Schedule: s.sched, Err: context.Cause(s.ctx)}
	}
	s.terminate()
	s.awaitHandlers(5 * time.Second)
	return s.judge()
}

// awaitHandlers waits, up to d, for the proxies' handlers to finish
// (a dead life's held request, say), so the verdict reads a finished
// record.
func (s *sim) awaitHandlers(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := s.inflight
		s.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *sim) current() *life {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life
}

func (s *sim) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// now advances the engine's clock and returns it.
func (s *sim) now() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	return s.clock
}

// step looks around once; false when the schedule is over.
func (s *sim) step(end time.Time) bool {
	now := time.Now()
	s.mu.Lock()
	failed := s.failure != nil
	l := s.life
	s.mu.Unlock()
	if failed {
		return false
	}
	if s.replicas() {
		if !s.stepReplicas(now) {
			return false
		}
	} else if l.proc.Exited() {
		switch l.reason() {
		case endSuperseded:
			l.judgeSupersede(s)
			s.endLife(l, endSuperseded)
			if s.failed() {
				return false // no new life once a rule failed: its verdict stands
			}
			if err := s.startLife(); err != nil {
				s.fail(AgentLifecycle, "the agent could not be started again after it was superseded: %v", err)
				return false
			}
			return true
		case "":
			s.fail(AgentLifecycle, "the agent (life %d) exited on its own (%s)", l.n, l.proc.ExitString())
			l.markEnded(endCrashed)
			s.endLife(l, endCrashed)
			return false
		}
	} else if l.reason() == endSuperseded && now.Sub(l.supersededAt) > s.cfg.Grace {
		l.judgeSupersede(s)
		s.endLife(l, endSuperseded)
		return false
	}
	if s.fireDue(now) {
		return true
	}
	if s.quiet(now) {
		if s.pending() {
			s.fireNext(true)
			return true
		}
		return false
	}
	s.mu.Lock()
	sinceProgress := now.Sub(s.progress)
	stalled := sinceProgress >= stallAfter
	if l := s.life; l != nil && !l.asked && now.Sub(l.started) < s.cfg.ConnectTimeout {
		stalled = false // still starting up: see arrive
	}
	if s.awaitingTakeoverLocked(now) {
		stalled = false // failing over: the standby waits out the lease
	}
	giveUp := s.cfg.Quiet * time.Duration(max(s.owed, 1))
	end = end.Add(s.cfg.Quiet * time.Duration(s.owedTotal))
	s.mu.Unlock()
	if stalled {
		pending, aimed := s.nextAimed()
		switch {
		case pending && (sinceProgress >= s.cfg.Quiet || !aimed || !s.turnOpen()):
			s.fireNext(false)
			return true
		case pending:
			// A turn is open and the event is aimed at a kind of request
			// (Event.aimed): a turn waits seconds on a model, a backoff or
			// a POST settling, and a kill or fault aimed at its reply must
			// wait for the reply, or a slow agent would never meet one. It
			// waits up to -quiet, as long as a turn may make no progress.
		case s.playStopped():
			return true
		case sinceProgress >= giveUp:
			s.fail(Quiet, "no claim, mark or reply for %s: %s", sinceProgress.Truncate(time.Second), s.stuckReason())
			return false
		}
	}
	if now.After(end) {
		s.fail(Quiet, "the schedule ran past its deadline (%s, and -quiet for each failure injected): %s", deadline, s.stuckReason())
		return false
	}
	return true
}

// nextAimed reports whether an event is pending, and whether it is aimed
// at a kind of request (Event.aimed): one look under one lock, as a
// proxy may fire the event at the cursor meanwhile.
func (s *sim) nextAimed() (pending, aimed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursor >= len(s.sched.Events) {
		return false, false
	}
	return true, s.sched.Events[s.cursor].aimed()
}

// turnOpen reports whether a turn is open (oracle.TurnOpen), from the
// claims Band applied.
func (s *sim) turnOpen() bool {
	var claims []oracle.Claim
	s.mu.Lock()
	for _, a := range s.attempts {
		if a.EP == fakeband.EndpointProcessing && a.Status/100 == 2 {
			claims = append(claims, oracle.Claim{Room: a.Room, Msg: a.Msg, Life: a.Life})
		}
	}
	lives := append([]*life(nil), s.lives...)
	s.mu.Unlock()
	// A life's proxy serves before the life is listed: one not listed
	// yet is starting, so it may run.
	running := func(n int) bool { return n > len(lives) || lives[n-1].reason() == "" }
	return oracle.TurnOpen(s.band, s.agent.ID, claims, running)
}

// excuse records n failures injected into the agent's requests (error
// answers, lost answers, a kill): an agent may wait its retry cadence,
// up to Config.Quiet, after each before it makes progress again.
func (s *sim) excuse(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owed += n
	s.owedTotal += n
}

// failed reports whether an engine-level rule has failed.
func (s *sim) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure != nil
}

// pending reports whether events are left to fire.
func (s *sim) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor < len(s.sched.Events)
}

// quiet: every message said is processed, no room is stopped, nothing is
// in flight, and no mark or post came for quietFor.
func (s *sim) quiet(now time.Time) bool {
	s.mu.Lock()
	busy := s.busy || s.inflight > 0 || now.Sub(s.lastSend) < quietFor || now.Sub(s.progress) < quietFor
	if l := s.life; l != nil && !l.asked && now.Sub(l.started) < s.cfg.ConnectTimeout {
		busy = true // a life starting up has yet to ask for what a request-bound event waits on
	}
	msgs := append([]*message(nil), s.messages...)
	s.mu.Unlock()
	if busy {
		return false
	}
	for _, m := range msgs {
		if s.band.Status(s.agent.ID, m.ID) != fakeband.StatusProcessed {
			return false
		}
	}
	for _, r := range s.rooms {
		if s.band.Stopped(s.agent.ID, r.ID) {
			return false
		}
	}
	return true
}

func (s *sim) stuckReason() string {
	s.mu.Lock()
	msgs := append([]*message(nil), s.messages...)
	why := "the system did not go quiet"
	if h := s.life; s.replicas() && h != nil && h.rep.gone != "" && h.rep.gone != "terminated" {
		why = fmt.Sprintf("no replica took over from life %d (%s %s before)", h.n, h.rep.gone, time.Since(h.rep.goneAt).Truncate(time.Second))
	}
	s.mu.Unlock()
	var pending []string
	for _, m := range msgs {
		if st := s.band.Status(s.agent.ID, m.ID); st != fakeband.StatusProcessed {
			pending = append(pending, fmt.Sprintf("%s is %q", m.Label, st))
		}
	}
	sort.Strings(pending)
	if len(pending) == 0 {
		return why
	}
	return why + ": " + strings.Join(pending, ", ")
}

// fail records an engine-level violation; the first one stands.
func (s *sim) fail(inv Invariant, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = &Violation{Invariant: inv, Reason: fmt.Sprintf(format, args...)}
	}
}

// noteNot records something the schedule could not exercise.
func (s *sim) noteNot(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes[why] = true
}

func (s *sim) count(fault string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fired[fault]++
}

// advance moves past the current event and arms the next.
func (s *sim) advance() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked()
}

func (s *sim) advanceLocked() {
	s.cursor++
	for s.early[s.cursor] {
		s.cursor++
	}
	s.busy = false
	s.armedAt = time.Now()
	s.progress = time.Now()
	if s.cursor < len(s.sched.Events) {
		s.skip = s.sched.Events[s.cursor].Skip
	}
}

// fireDue fires the current event if it is timed and its time has come.
func (s *sim) fireDue(now time.Time) bool {
	s.mu.Lock()
	if s.busy || s.cursor >= len(s.sched.Events) {
		s.mu.Unlock()
		return false
	}
	ev := s.sched.Events[s.cursor]
	if ev.requestBound() || now.Before(s.armedAt.Add(ev.After)) {
		s.mu.Unlock()
		return false
	}
	s.busy = true
	s.mu.Unlock()
	s.apply(ev)
	s.advance()
	return true
}

// fireNext fires the current event now, because the system stalled or
// went quiet before it came due. A kill then hits the stalled agent; any
// other request-bound event, and a kill once the system is quiet, is
// dropped: it never fired.
func (s *sim) fireNext(quiet bool) {
	s.mu.Lock()
	if s.busy || s.cursor >= len(s.sched.Events) {
		s.mu.Unlock()
		return // or a proxy fired it meanwhile
	}
	ev := s.sched.Events[s.cursor]
	if ev.requestBound() {
		if i := s.nextSayLocked(); i >= 0 {
			if (ev.Kind == Interrupt || ev.Kind == Stop) && ev.Endpoint == fakeband.EndpointContext {
				// The agent does not read the room: hold the next
				// claim instead, and the witness says so.
				s.sched.Events[s.cursor].Endpoint, s.sched.Events[s.cursor].Skip = fakeband.EndpointProcessing, 0
				s.skip = 0
				s.trace("no GET /context came: the signal waits for the next claim instead")
			}
			// Its request may come with the next message: say that first.
			if s.early == nil {
				s.early = make(map[int]bool)
			}
			s.early[i] = true
			s.progress = time.Now()
			s.mu.Unlock()
			s.trace("waiting for its request; saying the next message first")
			s.apply(s.sched.Events[i])
			return
		}
	}
	s.busy = true
	s.mu.Unlock()
	switch {
	case ev.isKill() && !quiet && s.replicas() && s.current().reason() != "":
		s.trace("dropped (the holder is gone and none took over): " + ev.String())
	case (ev.Kind == Pause || ev.Kind == HandOver) && s.replicas():
		// No such request came: the holder is paused or handed over
		// where it stands, idle or stalled, which fails it over too.
		if l := s.current(); l.reason() == "" {
			s.trace("its request never came: " + ev.Kind.String() + " of the holder where it stands")
			go func() {
				if ev.Kind == Pause {
					s.pause(l, ev.Delay)
				} else {
					s.handOver(l)
				}
				s.advance()
				s.poke()
			}()
			return
		}
		s.trace("dropped (the holder is gone and none took over): " + ev.String())
	case ev.isKill() && !quiet:
		s.trace("stalled: firing " + ev.String() + " now")
		s.count("kill_idle")
		s.excuse(1)
		s.restart(s.current(), nil)
	case ev.requestBound():
		s.trace("dropped (its request never came): " + ev.String())
		if ev.Kind == Interrupt || ev.Kind == Stop {
			s.noteNot(fmt.Sprintf("%s held at %s found no such request", article(ev.Kind), endpointNames[ev.Endpoint]))
		}
	default:
		s.apply(ev)
	}
	s.advance()
}

// nextSayLocked is the index of the next Say after the cursor not said
// yet, or -1.
func (s *sim) nextSayLocked() int {
	for i := s.cursor + 1; i < len(s.sched.Events); i++ {
		if s.sched.Events[i].Kind == Say && !s.early[i] {
			return i
		}
	}
	return -1
}

// match hands the current request-bound event to a request of life l to
// endpoint ep, if it is that event's request.
func (s *sim) match(l *life, ep fakeband.Endpoint) *Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy || s.cursor >= len(s.sched.Events) || s.life != l {
		return nil
	}
	ev := s.sched.Events[s.cursor]
	if !ev.requestBound() || (ev.Endpoint != "" && ev.Endpoint != ep) {
		return nil
	}
	if s.skip > 0 {
		s.skip--
		return nil
	}
	s.busy = true
	return &ev
}

// apply carries out an event that acts on the world.
func (s *sim) apply(ev Event) {
	s.trace("event: " + ev.String())
	switch ev.Kind {
	case Say:
		room := s.room(ev.Room)
		id, err := s.band.Say(s.rooms[room].ID, s.human.ID, ev.Label, s.agent.ID)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.messages = append(s.messages, &message{ID: id, Room: room, Label: ev.Label})
		s.mu.Unlock()
	case Interrupt, Stop, Play:
		s.signal(ev.Kind, s.room(ev.Room), "", false)
	case DropSocket:
		if s.current().socketsOpen.Load() > 0 {
			s.count("socket_drop")
			s.excuse(1) // an agent that lives on its socket reconnects at its cadence
		}
		s.band.DropSockets(s.agent.ID)
	case Supersede:
		s.supersede()
	}
	s.poke()
}

func (s *sim) room(i int) int {
	if i < 0 || i >= len(s.rooms) {
		return 0
	}
	return i
}

func (s *sim) roomIndex(id string) int {
	for i, r := range s.rooms {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// lastSeq is the fake's latest event sequence number.
func (s *sim) lastSeq() int {
	ev := s.band.Events()
	if len(ev) == 0 {
		return 0
	}
	return ev[len(ev)-1].Seq
}

// signal sends an interrupt, stop or play to the agent in room, and, for
// the first two, waits until its push passed to the agent's socket and
// the agent had pushReadWait to read it. message names the turn a held
// signal cuts.
func (s *sim) signal(kind Kind, room int, message string, held bool) {
	s.signalNamed(kind, room, message, held, "")
}

// signalNamed is signal, counted in the fault histogram as name if set.
func (s *sim) signalNamed(kind Kind, room int, message string, held bool, name string) {
	roomID := s.rooms[room].ID
	l := s.current()
	if kind != Play && !s.cfg.NoSocket {
		// A life that just started may not have joined its control
		// topic yet; a signal sent now would be lost for nothing.
		s.awaitListening(l)
	}
	c := &control{Kind: kind, Room: room, Message: message, Held: held}
	var err error
	switch kind {
	case Interrupt:
		err = s.band.Interrupt(s.agent.ID, roomID)
	case Stop:
		err = s.band.StopRoom(roomID)
	case Play:
		c.PlayTick = s.now()
		s.mu.Lock()
		for _, prev := range s.controls {
			if prev.Kind == Stop && prev.Room == room && prev.PlayTick == 0 {
				prev.PlayTick = c.PlayTick
			}
		}
		s.mu.Unlock()
		err = s.band.PlayRoom(roomID)
	}
	if err != nil {
		s.trace(fmt.Sprintf("%s room %d refused: %v", kind, room+1, err))
		return
	}
	ev := s.band.Events()
	action := ev[len(ev)-1]
	c.Seq = action.Seq
	open := l.listening()
	named := name != ""
	if !named {
		name = kind.String()
	}
	if held {
		name += "_held"
	}
	if kind != Play {
		if l.waitPush(action.Detail, pushWait) {
			time.Sleep(pushReadWait)
			c.Delivered, c.Effective, c.UntilSeq = true, s.now(), s.lastSeq()
		} else {
			name += "_lost"
			if !open {
				s.noteNot(fmt.Sprintf("%s found the agent not listening on its socket", article(kind)))
			}
		}
	} else if !open && !named {
		name = "play_while_disconnected"
	}
	s.count(name)
	s.mu.Lock()
	s.controls = append(s.controls, c)
	s.mu.Unlock()
	if kind == Play {
		s.trace(fmt.Sprintf("play room %d at seq %d", room+1, c.Seq))
	} else {
		s.trace(fmt.Sprintf("%s room %d at seq %d: delivered=%v", kind, room+1, c.Seq, c.Delivered))
	}
}

// supersede tells the agent another connection took over, if it has a
// socket to hear it on; the driver then expects it to exit non-zero.
func (s *sim) supersede() {
	l := s.current()
	if !s.awaitListening(l) {
		s.noteNot("a supersede found the agent not listening on its socket")
		return
	}
	s.band.Supersede(s.agent.ID)
	if !l.waitPush(supersedeMark, pushWait) {
		s.noteNot("a supersede found the agent's socket not yet joined to its control topic")
		return
	}
	if s.replicas() {
		s.markGone(l, "superseded") // a standby may take over as soon as it hears
	}
	time.Sleep(pushReadWait)
	tick := s.now()
	l.markSuperseded(tick)
	s.count("supersede")
	s.trace(fmt.Sprintf("life %d superseded", l.n))
}

// awaitListening waits for l to listen on its socket: up to listenWait
// after its first request, which a life starting up may take up to
// Config.ConnectTimeout to send.
func (s *sim) awaitListening(l *life) bool {
	if !s.awaitFirstRequest(l) {
		return false
	}
	return l.awaitListening(listenWait)
}

// article puts "a" or "an" before the kind's name.
func article(k Kind) string {
	if k == Interrupt {
		return "an interrupt"
	}
	return "a " + k.String()
}

// playStopped resumes every room still stopped once nothing else is left
// to fire, so every schedule can end; it reports whether it did anything.
func (s *sim) playStopped() bool {
	played := false
	for i, r := range s.rooms {
		if s.band.Stopped(s.agent.ID, r.ID) {
			s.trace(fmt.Sprintf("final play in room %d", i+1))
			s.signalNamed(Play, i, "", false, "final_play")
			played = true
		}
	}
	if played {
		s.mu.Lock()
		s.progress = time.Now()
		s.mu.Unlock()
	}
	return played
}
