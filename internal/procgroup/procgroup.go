// Package procgroup runs a command as the leader of a process group of its
// own and ends it together with everything it started, on every path: a
// SIGKILL that reaches only the leader leaves its children running, and a
// child that made a process group of its own would escape a signal sent to
// the leader's group.
//
// It is what bandonce verify uses for the agent under test (killed at a
// chosen request, restarted, terminated at the end) and what bandonce run
// uses for the command it runs per message (cancelled by an interrupt, a
// stop, a timeout or a shutdown). It needs a Unix system; the descendant
// walk and the orphan sweep need Linux's /proc and do less elsewhere.
package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrUnsupported is returned by Start where process groups do not exist.
var ErrUnsupported = errors.New("procgroup: process groups need a Unix system")

// Options tune Start.
type Options struct {
	// DieWithParent asks the kernel to SIGKILL the leader if the process
	// that started it dies first (Linux only; ignored elsewhere), so a
	// SIGKILL of the starter does not leave its command running.
	DieWithParent bool
}

// Process is a command running as the leader of its own process group.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's, set before done closes

	mu    sync.Mutex
	known map[int]procEntry // descendants seen so far (see track)
}

// started holds the pids Start launched whose Wait has not returned, so
// that ReapOrphans never waits for a child os/exec is waiting for.
var started sync.Map

// starting is held (shared) by Start from the fork until the pid is in
// started, and (exclusively) by ReapOrphans while it looks for orphans.
var starting sync.RWMutex

// Start starts cmd as the leader of a new process group. cmd must not
// have been started; its SysProcAttr, if set, keeps its other fields.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	if err := configure(cmd, opts); err != nil {
		return nil, err
	}
	// Between the fork and the record of its pid, the child would look
	// like an orphan to a ReapOrphans running meanwhile (bandonce verify
	// runs schedules in parallel): the two exclude each other.
	starting.RLock()
	if err := cmd.Start(); err != nil {
		starting.RUnlock()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	pid := cmd.Process.Pid
	started.Store(pid, true)
	starting.RUnlock()
	go func() {
		p.err = cmd.Wait()
		started.Delete(pid)
		close(p.done)
	}()
	return p, nil
}

// Pid is the leader's pid, which is also the group's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the leader has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the leader has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the leader to exit and returns what exec.Cmd.Wait did.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// ExitCode is the leader's exit status once it has exited: -1 if a
// signal ended it or it has not exited.
func (p *Process) ExitCode() int {
	if !p.Exited() || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// ExitString describes how the leader ended: "exit status 1",
// "signal: killed", or "running".
func (p *Process) ExitString() string {
	if !p.Exited() || p.cmd.ProcessState == nil {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// Signal sends sig to the leader alone, as a supervisor does to the main
// process of a service.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return os.ErrProcessDone
	}
	return p.cmd.Process.Signal(sig)
}

// SignalGroup sends sig to every process of the leader's group. It works
// after the leader has exited, as long as a member is left.
func (p *Process) SignalGroup(sig syscall.Signal) error { return signalGroup(p.Pid(), sig) }

// Kill ends the group at once: SIGKILL to the group and to every
// descendant and its group, even those that made groups of their own, then
// waits for the leader. It is safe to call more than once, and after the
// leader has exited.
func (p *Process) Kill() {
	p.track()
	p.mu.Lock()
	known := make([]procEntry, 0, len(p.known))
	for _, e := range p.known {
		known = append(known, e)
	}
	p.mu.Unlock()
	killed := killTree(p.Pid(), known)
	<-p.done
	// A descendant forked while the tree was being walked is now either
	// in the group or an orphan; a second pass finds it in the group.
	_ = signalGroup(p.Pid(), syscall.SIGKILL)
	// A SIGKILL is delivered asynchronously: wait, briefly, until the
	// processes it was sent to are gone, so that Kill returning means
	// they are.
	deadline := time.Now().Add(killWait)
	for len(Alive(killed)) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// killWait bounds Kill's wait for the processes it killed to be gone:
// a few milliseconds as a rule, far longer on a loaded machine, and only
// a process stuck in the kernel (uninterruptible sleep) would use it up.
const killWait = 5 * time.Second

// Track remembers the leader's descendants as they are now. Once the
// leader has exited its orphans are re-parented and no walk from it can
// find them, so Kill kills what was tracked as well as what it finds:
// call Track now and then while the command runs (Terminate does while it
// waits). It does nothing off Linux.
func (p *Process) Track() { p.track() }

func (p *Process) track() {
	if p.Exited() {
		return
	}
	found := descendants(p.Pid())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = make(map[int]procEntry)
	}
	seen := make(map[int]bool, len(found))
	for _, e := range found {
		p.known[e.pid] = e
		seen[e.pid] = true
	}
	// One no walk finds any more is kept while it lives (re-parented, it
	// is still the command's), and forgotten once it is gone, so a
	// command that churns children keeps only those alive.
	for pid, e := range p.known {
		if now, ok := readStat(pid); !seen[pid] && (!ok || now.start != e.start) {
			delete(p.known, pid)
		}
	}
}

// Terminate asks the group to stop with SIGTERM and kills it (Kill) if the
// leader has not exited after grace. It reports whether it had to kill.
// Members that outlive an exited leader are killed too.
func (p *Process) Terminate(grace time.Duration) (killed bool) {
	p.track()
	_ = p.SignalGroup(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	tick := time.NewTicker(trackEvery)
	defer tick.Stop()
	for wait := true; wait; {
		select {
		case <-p.done:
			wait = false
		case <-t.C:
			killed, wait = true, false
		case <-tick.C:
			p.track()
		}
	}
	p.Kill()
	return killed
}

// trackEvery is how often Terminate looks for new descendants while the
// leader winds down.
const trackEvery = 50 * time.Millisecond
