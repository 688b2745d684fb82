package procverify

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/band-once/bandonce/internal/cmdlog"
	"github.com/band-once/bandonce/internal/procgroup"
)

// life is one run of the agent's process, from its start until it exits.
// Each life reaches the fake through a proxy of its own on a port of its
// own, so nothing a dead life sent can arrive after it died.
type life struct {
	n       int
	proc    *procgroup.Process
	proxy   *proxy
	out     *outputTail
	started time.Time
	// asked: the life has made its first request, so it has started up;
	// until then it is starting, not stalled. Guarded by sim.mu.
	asked bool

	// dead: nothing more of this life is applied to the fake. Guarded by
	// sim.applyMu.
	dead bool

	mu            sync.Mutex
	ended         string    // why the engine ended it (endKilled, ...); "" while it may run
	supersededAt  time.Time // when the supersede had reached it
	supersedeTick int
	termAt        time.Time
	termExit      string // how it exited after SIGTERM
	termTook      time.Duration
	termKilled    bool
	connected     bool

	socketsOpen atomic.Int32
	pushMu      sync.Mutex
	pushes      map[string]bool // correlation ids (and supersedeMark) that passed to the agent
	sockets     []*watchedSocket
	everSocket  bool // a socket of this life was upgraded

	rep replica // with replicas: its part in the election, guarded by sim.mu
}

// isDead reports whether endLife ended it.
func (l *life) isDead(s *sim) bool {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return l.dead
}

// addSocket registers a tunnel so that the end of the life closes it.
func (l *life) addSocket(c *watchedSocket) {
	l.pushMu.Lock()
	defer l.pushMu.Unlock()
	l.sockets = append(l.sockets, c)
	l.everSocket = true
}

// listening reports whether a socket of the life is open and joined to
// the agent's control topic: a signal sent now can reach it.
func (l *life) listening() bool {
	l.pushMu.Lock()
	defer l.pushMu.Unlock()
	for _, c := range l.sockets {
		if c.joined.Load() && !c.closed.Load() {
			return true
		}
	}
	return false
}

// awaitListening waits up to d for the life to be listening.
func (l *life) awaitListening(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !l.listening() {
		if time.Now().After(deadline) || l.proc.Exited() {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func (l *life) closeSockets() {
	l.pushMu.Lock()
	socks := l.sockets
	l.sockets = nil
	l.pushMu.Unlock()
	for _, c := range socks {
		_ = c.Close()
	}
}

// Why the engine ended a life.
const (
	endKilled      = "killed"
	endSuperseded  = "superseded"
	endTerminated  = "terminated"
	endCrashed     = "crashed"
	endInterrupted = "interrupted"
	endHandedOver  = "handed over" // a replica that got SIGTERM as a deploy does
	endLeft        = "left"        // a replica that exited after another took over
)

func (l *life) reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

func (l *life) markEnded(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == "" {
		l.ended = why
	}
}

func (l *life) markSuperseded(tick int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == "" {
		l.ended, l.supersededAt, l.supersedeTick = endSuperseded, time.Now(), tick
	}
}

func (l *life) notePush(id string) {
	l.pushMu.Lock()
	defer l.pushMu.Unlock()
	if l.pushes == nil {
		l.pushes = make(map[string]bool)
	}
	l.pushes[id] = true
}

// waitPush waits up to d for the push id to pass to the agent's socket.
func (l *life) waitPush(id string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		l.pushMu.Lock()
		seen := l.pushes[id]
		l.pushMu.Unlock()
		if seen {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// judgeSupersede checks how a superseded life ended: non-zero, within the
// grace.
func (l *life) judgeSupersede(s *sim) {
	took := time.Since(l.supersededAt)
	switch {
	case !l.proc.Exited():
		s.fail(SupersedeExit, "the agent (life %d) was still running %s after it was superseded", l.n, took.Truncate(time.Millisecond))
	case s.cfg.SupersedeExitCode && l.proc.ExitCode() == 0:
		s.fail(SupersedeExit, "the agent (life %d) exited 0 after it was superseded; -supersede-exit asks for a non-zero status", l.n)
	}
}

// agentEnv is the environment every life gets: the user's, without what
// agentBase withholds, and the agent's own, under both prefixes Band's
// SDKs read, pointing at this life's proxy.
func (s *sim) agentEnv(p *proxy) []string {
	env, _ := agentBase(os.Environ())
	// The schedule's own temporary directory, under each name a runtime
	// reads it by, so that lives of parallel schedules share no lock
	// files or sockets there.
	env = slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "TMPDIR" || name == "TMP" || name == "TEMP"
	})
	if s.tmp != "" {
		env = append(env, "TMPDIR="+s.tmp, "TMP="+s.tmp, "TEMP="+s.tmp)
	}
	root := "http://" + p.addr
	// The bound on how late this Band applies a request, told to an
	// agent that reads it (band-once does), unless the user set it.
	for _, kv := range []string{
		"BANDONCE_REQUEST_TIMEOUT=" + AgentRequestTimeout.String(),
		"BANDONCE_SETTLE_WINDOW=" + AgentSettleWindow.String(),
	} {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := os.LookupEnv(name); !set {
			env = append(env, kv)
		}
	}
	ws := "ws://" + p.addr + "/api/v1/socket/websocket"
	return append(env,
		"BAND_API_KEY="+s.agent.Key,
		"BAND_AGENT_ID="+s.agent.ID,
		"BAND_BASE_URL="+root+"/api/v1",
		"BAND_REST_URL="+root,
		"BAND_WS_URL="+ws,
		"THENVOI_API_KEY="+s.agent.Key,
		"THENVOI_AGENT_ID="+s.agent.ID,
		"THENVOI_REST_URL="+root,
		"THENVOI_WS_URL="+ws,
	)
}

// startLife starts a fresh process of the agent behind a fresh proxy.
func (s *sim) startLife() error {
	s.mu.Lock()
	n := len(s.lives) + 1
	s.mu.Unlock()
	l := &life{n: n, out: newOutputTail(s.cfg.Output, fmt.Sprintf("[%s seed %d life %d] ", s.sched.Check, s.sched.Seed, n))}
	p, err := newProxy(s, l)
	if err != nil {
		return err
	}
	l.proxy = p
	proc, err := startAgent(s.cfg.Command, s.replicaEnv(s.agentEnv(p), os.LookupEnv), l.out)
	if err != nil {
		p.close()
		return err
	}
	l.proc, l.started = proc, time.Now()
	s.mu.Lock()
	s.lives = append(s.lives, l)
	if s.life == nil || !s.replicas() {
		s.life = l // a new replica stands by until it speaks to Band
	}
	s.progress = time.Now()
	s.mu.Unlock()
	s.trace(fmt.Sprintf("life %d starts (pid %d, proxy %s)", n, proc.Pid(), p.addr))
	go func() {
		<-proc.Done()
		s.poke()
	}()
	return nil
}

// startAgent starts the command in a process group of its own, its output
// going to out.
func startAgent(command, env []string, out *outputTail) (*procgroup.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = env
	// A pipe of our own rather than an io.Writer: os/exec would wait for
	// its copy to finish, which a grandchild holding the pipe can delay.
	cmd.Stdout, cmd.Stderr = w, w
	proc, err := procgroup.Start(cmd, procgroup.Options{DieWithParent: true})
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	go out.drain(r)
	return proc, nil
}

// endLife makes sure l is over: nothing more of it is applied, its whole
// process tree is killed, its proxy closed, and any orphan it left reaped.
func (s *sim) endLife(l *life, why string) {
	l.markEnded(why)
	s.applyMu.Lock()
	l.dead = true
	s.applyMu.Unlock()
	l.proc.Kill()
	l.proxy.close()
	procgroup.ReapOrphans()
	s.trace(fmt.Sprintf("life %d ended (%s): %s", l.n, why, l.proc.ExitString()))
}

// restart kills l, if it is still the current life, applies what must be
// applied after its death (a KillAfter's request), and starts the next
// life.
func (s *sim) restart(l *life, afterDeath func()) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.current() != l {
		return
	}
	if s.ctx.Err() != nil {
		s.endLife(l, endInterrupted) // the run is over: no next life
		return
	}
	if s.replicas() {
		if l.reason() != "" {
			return // the holder is gone already; none took over yet
		}
		s.markGone(l, FailoverDeath)
	}
	s.endLife(l, endKilled)
	if afterDeath != nil {
		afterDeath()
	}
	if s.failed() {
		// A rule already failed: its verdict stands, and a new life
		// would only be SIGTERMed before it had started.
		s.trace("a rule failed: no new life")
		s.poke()
		return
	}
	if err := s.startLife(); err != nil {
		s.fail(AgentLifecycle, "the agent could not be started again after a kill: %v", err)
	}
	s.poke()
}

// terminate ends the schedule's last life as a supervisor stops a service:
// SIGTERM to the process, exit 0 expected within the grace; with replicas,
// every replica still running.
func (s *sim) terminate() {
	if s.replicas() {
		s.terminateReplicas()
		return
	}
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.terminateOne(s.current())
}

// terminateOne ends l at the end of the schedule.
func (s *sim) terminateOne(l *life) {
	if l == nil || l.isDead(s) {
		return
	}
	if l.reason() == endSuperseded {
		// A superseded life was told to go: it gets what is left of its
		// grace, and is judged, however early the schedule ran out.
		t := time.NewTimer(time.Until(l.supersededAt.Add(s.cfg.Grace)))
		select {
		case <-l.proc.Done():
		case <-t.C:
		}
		t.Stop()
		l.judgeSupersede(s)
		s.endLife(l, endSuperseded)
		return
	}
	if l.proc.Exited() || l.reason() != "" {
		s.endLife(l, endTerminated)
		return
	}
	if !s.awaitFirstRequest(l) {
		// A process that has not asked for anything yet may not have
		// installed its signal handlers (an interpreter starting up):
		// SIGTERM now says nothing of how it stops.
		s.noteNot(fmt.Sprintf("SIGTERM: the agent's last life made no request within %s, so how it stops was not judged", s.cfg.ConnectTimeout))
		s.endLife(l, endKilled)
		return
	}
	s.terminateLife(l, endTerminated)
}

// terminateLife sends l SIGTERM, waits up to the grace for it to exit,
// records how it did for the rule TermExit, and ends it as why.
func (s *sim) terminateLife(l *life, why string) {
	l.mu.Lock()
	l.ended, l.termAt = why, time.Now()
	l.mu.Unlock()
	s.trace(fmt.Sprintf("SIGTERM life %d", l.n))
	_ = l.proc.Signal(syscall.SIGTERM)
	t := time.NewTimer(s.cfg.Grace)
	select {
	case <-l.proc.Done():
	case <-t.C:
	}
	t.Stop()
	l.mu.Lock()
	l.termTook = time.Since(l.termAt)
	l.termKilled = !l.proc.Exited()
	l.termExit = l.proc.ExitString()
	l.mu.Unlock()
	s.endLife(l, why)
}

// awaitFirstRequest waits, up to what is left of Config.ConnectTimeout
// since l started, for l's first request; false if none came (or l
// exited first).
func (s *sim) awaitFirstRequest(l *life) bool {
	deadline := l.started.Add(s.cfg.ConnectTimeout)
	for {
		s.mu.Lock()
		asked := l.asked
		s.mu.Unlock()
		switch {
		case asked:
			return true
		case l.proc.Exited() || time.Now().After(deadline) || s.ctx.Err() != nil:
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outputTail keeps the last lines a life wrote, for the report, and
// copies them to a writer with a prefix when one is set (-v).
type outputTail struct {
	mu     sync.Mutex
	lines  []string
	echo   func(string)
	prefix string
	done   chan struct{}
}

const keepLines = 20

func newOutputTail(echo func(string), prefix string) *outputTail {
	return &outputTail{echo: echo, prefix: prefix, done: make(chan struct{})}
}

// drain reads the life's output to its end, each line cut to
// cmdlog.MaxLine (with how much was cut), so that no line the agent
// writes is held whole or blocks it on a full pipe.
func (o *outputTail) drain(r *os.File) {
	defer close(o.done)
	defer r.Close()
	_ = cmdlog.ReadLines(r, cmdlog.MaxLine, func(line []byte, cut int) {
		if cut > 0 {
			o.add(fmt.Sprintf("%s [%d bytes cut]", line, cut))
			return
		}
		o.add(string(line))
	})
}

func (o *outputTail) add(line string) {
	o.mu.Lock()
	o.lines = append(o.lines, line)
	if len(o.lines) > keepLines {
		o.lines = o.lines[len(o.lines)-keepLines:]
	}
	o.mu.Unlock()
	if o.echo != nil {
		o.echo(o.prefix + line)
	}
}

// Lines returns the last lines written, once the output has closed (or
// after a short wait if something still holds it open).
func (o *outputTail) Lines() []string {
	t := time.NewTimer(200 * time.Millisecond)
	select {
	case <-o.done:
	case <-t.C:
	}
	t.Stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}
