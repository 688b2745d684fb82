package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// procEntry is what /proc/PID/stat says of one process.
type procEntry struct {
	pid, ppid, pgid int
	state           byte
	// start is when the process started, in clock ticks after boot: with
	// pid, what tells one process from a later one that reused its pid.
	start uint64
}

// readStat parses /proc/PID/stat. The command name sits in parentheses and
// may hold spaces and parentheses itself, so the fields are read after the
// last ')'.
func readStat(pid int) (procEntry, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procEntry{}, false
	}
	// After the name: state (field 3 of proc(5)), ppid, pgrp, …,
	// starttime (field 22).
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || len(f[0]) != 1 {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0], start: start}, true
}

// processes lists every process /proc shows.
func processes() []procEntry {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procEntry, 0, len(dir))
	for _, d := range dir {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if e, ok := readStat(pid); ok {
			out = append(out, e)
		}
	}
	return out
}

// descendants returns every process below pid in the parent links, and
// every member of pid's group.
func descendants(pid int) []procEntry {
	all := processes()
	children := map[int][]procEntry{}
	for _, e := range all {
		children[e.ppid] = append(children[e.ppid], e)
	}
	var out []procEntry
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out = append(out, c)
				queue = append(queue, c.pid)
			}
		}
	}
	for _, e := range all {
		if e.pgid == pid && !seen[e.pid] {
			seen[e.pid] = true
			out = append(out, e)
		}
	}
	return out
}

// Alive returns the pids of pids that are still running: a zombie, dead
// but not yet reaped, does not count.
func Alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if e, ok := readStat(pid); ok && e.state != 'Z' && e.state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// GroupMembers returns the running members of process group pgid.
func GroupMembers(pgid int) []int {
	var out []int
	for _, e := range processes() {
		if e.pgid == pgid && e.state != 'Z' && e.state != 'X' {
			out = append(out, e.pid)
		}
	}
	return out
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// BecomeSubreaper makes this process the reaper of its orphaned
// descendants: a process whose parent dies is re-parented here instead of
// to init, where ReapOrphans can find, kill and reap it.
func BecomeSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	subreaper.Store(true)
	return nil
}

// subreaper: BecomeSubreaper succeeded. Only then are the children Start
// did not launch orphans to reap; otherwise they are someone else's (a
// test binary's go build, say) and ReapOrphans leaves them alone.
var subreaper atomic.Bool

// ReapOrphans kills and reaps every child of this process that Start did
// not launch (after BecomeSubreaper, the orphans of dead descendants),
// with their descendants. It returns how many it found.
//
// An orphan whose process group's leader is still running is left alone:
// it belongs to a command that still works (a shell's background job whose
// subshell exited, say), and goes with its group. So is every orphan while
// a command Start launched still runs: one that made a group of its own
// (a daemon, ssh -f) may be that command's, still at work, and nothing
// tells whose it is; the last command to end takes them. Everything else
// is what a dead process left behind.
func ReapOrphans() int {
	if !subreaper.Load() {
		return 0
	}
	starting.Lock()
	defer starting.Unlock()
	running := false
	started.Range(func(any, any) bool { running = true; return false })
	if running {
		return 0
	}
	self, selfGroup := os.Getpid(), syscall.Getpgrp()
	n := 0
	for range 10 {
		var orphans []procEntry
		for _, e := range processes() {
			if e.ppid != self {
				continue
			}
			if _, ours := started.Load(e.pid); ours {
				continue
			}
			if e.state != 'Z' && e.pgid != e.pid && len(Alive([]int{e.pgid})) > 0 {
				continue // its group's leader still runs
			}
			orphans = append(orphans, e)
		}
		if len(orphans) == 0 {
			return n
		}
		for _, o := range orphans {
			if now, ok := readStat(o.pid); !ok || now.ppid != self {
				continue // reaped since the listing (by os/exec's Wait): gone, not an orphan
			}
			killTree(o.pid, nil)
			if o.pgid != selfGroup && o.pgid > 1 && o.pgid != o.pid {
				_ = signalGroup(o.pgid, syscall.SIGKILL) // a group whose leader is gone
			}
			// A child os/exec reaped after the listing (a stale entry) is
			// not ours to count: only a process Wait4 reaps here is.
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(o.pid, &ws, 0, nil); err == nil && pid == o.pid {
				n++
			}
		}
	}
	return n
}
