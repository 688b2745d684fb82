package procverify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// With Config.Replicas the engine runs several copies of the agent at
// once. It cannot see their election (the lease is the agent's business,
// in the schedule's database), so it reads it from the wire: the holder is
// the replica that last spoke to Band beyond GET /agent/me, and a replica
// that speaks after another took over from it is a fenced holder sending,
// unless the one that took over is gone meanwhile (killed, exited, handed
// over, paused).

// DefaultLeaseTime is the lease replicas are told when Config.LeaseTime is
// zero: long enough that a loaded machine's scheduling delays do not make a
// running holder lose it, short enough that a schedule's failovers fit in
// its deadline.
const DefaultLeaseTime = 3 * time.Second

// ErrNoPostgres: replicas were asked for without a PostgreSQL server to
// give them a database.
var ErrNoPostgres = errors.New("procverify: Replicas needs a PostgreSQL server (Config.Postgres)")

// The causes a failover is measured after.
const (
	FailoverDeath    = "death"     // the holder was SIGKILLed
	FailoverPause    = "pause"     // the holder was SIGSTOPped past its lease
	FailoverHandOver = "hand-over" // the holder got SIGTERM and let go
)

// Failover is one change of holder after the holder went: from the later
// of its going and its last request to the new holder's first request
// beyond GET /agent/me.
type Failover struct {
	Cause string
	Took  time.Duration
}

// replica is what the engine knows of one life as a replica. Guarded by
// sim.mu.
type replica struct {
	held       bool      // it has spoken to Band beyond GET /agent/me as the holder
	lastReq    time.Time // its latest request's arrival
	gone       string    // why it can no longer hold: a FailoverCause, or "superseded", "exited"
	goneAt     time.Time
	paused     bool
	pauseStart time.Time
	fencedAt   int // the engine's clock when another replica took over from it; 0 if none did
	fencedBy   int // that replica's life
}

// fencedSend is a request of a replica after another took over from it.
type fencedSend struct {
	life, pid, by int
	what          string
}

// pid is the life's process id, 0 before it started.
func (l *life) pid() int {
	if l.proc == nil {
		return 0
	}
	return l.proc.Pid()
}

func (s *sim) replicas() bool { return s.cfg.Replicas >= 2 }

// goneLocked reports whether l can no longer hold: killed, exited, handed
// over or superseded, or paused now.
func goneLocked(l *life) bool { return l.rep.gone != "" || l.rep.paused }

// speakLocked notes a request of life l, beyond GET /agent/me, in the
// holder's record: a takeover when another replica held, a fenced send
// when l was taken over from and the one that did is still there.
func (s *sim) speakLocked(l *life, a *attempt) {
	now := time.Now()
	defer func() { l.rep.lastReq = now }()
	h := s.life
	if h == l {
		l.rep.held = true
		return
	}
	s.takeovers++
	if l.rep.fencedAt > 0 && !goneLocked(h) {
		what := endpointNames[a.EP]
		if what == "" {
			what = "a request"
		}
		if a.Msg != "" {
			what += " for " + s.labelLocked(a.Msg)
		}
		if i := s.roomIndex(a.Room); i >= 0 {
			what += fmt.Sprintf(" in room %d", i+1)
		}
		s.fenced = append(s.fenced, fencedSend{life: l.n, pid: l.pid(), by: l.rep.fencedBy, what: what})
		return
	}
	if h.rep.held {
		h.rep.fencedAt, h.rep.fencedBy = s.clock, l.n
		switch {
		case h.rep.gone == FailoverDeath || h.rep.gone == FailoverHandOver || h.rep.paused:
			cause := h.rep.gone
			if h.rep.paused {
				cause = FailoverPause
			}
			from := h.rep.goneAt
			if h.rep.lastReq.After(from) {
				from = h.rep.lastReq
			}
			s.failovers = append(s.failovers, Failover{Cause: cause, Took: now.Sub(from)})
			s.fired["failover_after_"+strings.ReplaceAll(cause, "-", "_")]++
		case !goneLocked(h):
			// A running holder was taken over from: it missed its
			// renewals (a starved machine), or the election is broken.
			// Either way it must send nothing more.
			s.fired["takeover_from_a_running_holder"]++
		}
	}
	l.rep.fencedAt, l.rep.held = 0, true
	s.life = l
	s.progress = now
	s.trace(fmt.Sprintf("life %d takes over from life %d", l.n, h.n))
}

func (s *sim) labelLocked(id string) string {
	for _, m := range s.messages {
		if m.ID == id {
			return m.Label
		}
	}
	return "a message"
}

// markGone records why l can no longer hold, the first reason standing.
func (s *sim) markGone(l *life, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.rep.gone == "" {
		l.rep.gone, l.rep.goneAt = why, time.Now()
	}
}

// takeoverLimit is how long a failover may take (the holder gone or
// paused, no replica in its place) before the schedule counts as stalled.
const takeoverLimit = 20 * time.Second

// awaitingTakeover reports whether the holder is gone and no replica has
// taken over yet, for less than takeoverLimit: the system is failing over, not
// stalled. Called with s.mu held.
func (s *sim) awaitingTakeoverLocked(now time.Time) bool {
	h := s.life
	if !s.replicas() || h == nil || !goneLocked(h) {
		return false
	}
	since := h.rep.goneAt
	if h.rep.paused {
		since = h.rep.pauseStart
	}
	return now.Sub(since) < takeoverLimit
}

// pause stops l's process group until another replica has taken over
// (or takeoverLimit passed), then resumes it after delay.
func (s *sim) pause(l *life, delay time.Duration) {
	s.mu.Lock()
	if s.life != l || goneLocked(l) {
		s.mu.Unlock()
		return
	}
	l.rep.paused, l.rep.pauseStart = true, time.Now()
	s.fired["pause_holder"]++
	s.mu.Unlock()
	_ = l.proc.SignalGroup(syscall.SIGSTOP)
	s.trace(fmt.Sprintf("SIGSTOP life %d", l.n))
	deadline := time.Now().Add(takeoverLimit)
	for {
		s.mu.Lock()
		over := s.life != l
		s.mu.Unlock()
		if over || time.Now().After(deadline) || l.proc.Exited() || s.ctx.Err() != nil {
			if !over {
				s.noteNot(fmt.Sprintf("a pause of the holder saw no other replica take over within %s", takeoverLimit))
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-s.ctx.Done():
	}
	t.Stop()
	s.mu.Lock()
	l.rep.paused = false
	s.mu.Unlock()
	_ = l.proc.SignalGroup(syscall.SIGCONT)
	s.trace(fmt.Sprintf("SIGCONT life %d", l.n))
}

// handOver sends the holder SIGTERM, as a deploy does, waits up to the
// grace for it to exit (judged as the final SIGTERM is), and starts a new
// replica in its place.
func (s *sim) handOver(l *life) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if l.reason() != "" || l.proc.Exited() || s.ctx.Err() != nil {
		return
	}
	s.count("hand_over")
	s.markGone(l, FailoverHandOver)
	s.terminateLife(l, endHandedOver)
	if s.ctx.Err() != nil {
		return
	}
	if err := s.startLife(); err != nil {
		s.fail(AgentLifecycle, "a new replica could not be started after a hand-over: %v", err)
	}
	s.poke()
}

// stepReplicas looks after every replica's process once: a superseded one
// that exited, or overstayed its grace, one that exited by itself. It
// reports false when the schedule is over.
func (s *sim) stepReplicas(now time.Time) bool {
	s.mu.Lock()
	lives := slices.Clone(s.lives)
	s.mu.Unlock()
	for _, l := range lives {
		if l.isDead(s) {
			continue
		}
		switch why := l.reason(); {
		case why == endSuperseded && l.proc.Exited():
			l.judgeSupersede(s)
			s.endLife(l, endSuperseded)
			if err := s.startLife(); err != nil {
				s.fail(AgentLifecycle, "a new replica could not be started after one was superseded: %v", err)
				return false
			}
		case why == endSuperseded && now.Sub(l.supersededAt) > s.cfg.Grace:
			l.judgeSupersede(s)
			s.endLife(l, endSuperseded)
			return false
		case why == "" && l.proc.Exited():
			s.mu.Lock()
			fenced := l.rep.fencedAt > 0
			s.mu.Unlock()
			if !fenced {
				s.fail(AgentLifecycle, "the agent (life %d, a replica) exited on its own (%s)", l.n, l.proc.ExitString())
				s.endLife(l, endCrashed)
				return false
			}
			// A replica another took over from may exit; a supervisor
			// starts it again, as a standby.
			s.trace(fmt.Sprintf("life %d exited after another replica took over (%s)", l.n, l.proc.ExitString()))
			s.markGone(l, "exited")
			s.endLife(l, endLeft)
			if err := s.startLife(); err != nil {
				s.fail(AgentLifecycle, "a new replica could not be started after one exited: %v", err)
				return false
			}
		}
	}
	return true
}

// terminateReplicas ends the schedule: SIGTERM to every replica still
// running, the standbys first and the holder last, each judged as the
// final SIGTERM is.
func (s *sim) terminateReplicas() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.mu.Lock()
	lives := slices.Clone(s.lives)
	holder := s.life
	s.mu.Unlock()
	slices.SortStableFunc(lives, func(a, b *life) int {
		switch {
		case a == holder:
			return 1
		case b == holder:
			return -1
		}
		return 0
	})
	for _, l := range lives {
		s.markGone(l, "terminated")
		s.terminateOne(l)
	}
}

// replicaEnv is what a replica is told besides agentEnv: the schedule's
// database and the lease, unless the user's environment sets the lease.
func (s *sim) replicaEnv(env []string, lookup func(string) (string, bool)) []string {
	if !s.replicas() {
		return env
	}
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "BANDONCE_LEDGER=") })
	env = append(env, "BANDONCE_LEDGER="+s.db.url)
	if _, set := lookup("BANDONCE_LEASE_TIME"); !set {
		env = append(env, "BANDONCE_LEASE_TIME="+s.cfg.LeaseTime.String())
	}
	return env
}

// failoverEndpoint says whether a request counts as speaking to Band for
// the holder's record: everything but GET /agent/me, which a standby may
// ask before it campaigns.
func failoverEndpoint(ep fakeband.Endpoint) bool { return ep != fakeband.EndpointMe }
