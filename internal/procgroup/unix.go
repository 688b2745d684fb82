//go:build unix

package procgroup

import (
	"errors"
	"os/exec"
	"syscall"
)

func configure(cmd *exec.Cmd, opts Options) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	if opts.DieWithParent {
		setDeathSignal(cmd.SysProcAttr)
	}
	return nil
}

// signalGroup signals every member of group pgid. A group with no member
// left is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return errors.New("procgroup: refusing to signal process group <= 1")
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// killTree SIGKILLs the group led by pid, then every descendant of pid,
// found now or known from before, and every group a descendant leads. The
// walk comes first, while the parent links still lead from pid to its
// descendants; the group goes first so that nothing in it forks while the
// rest are killed. A known descendant is only killed if its pid still
// names the process that was seen (the same start time), so a pid reused
// by an unrelated process is left alone, and one that left for a group or
// a session of its own after it was seen is not.
func killTree(pid int, known []procEntry) (killed []int) {
	tree := descendants(pid)
	_ = signalGroup(pid, syscall.SIGKILL)
	for _, d := range known {
		// The same process (not a later one that reused its pid), as it
		// is now: it may have made a group or a session of its own since
		// it was tracked.
		if now, ok := readStat(d.pid); ok && now.start == d.start {
			tree = append(tree, now)
		}
	}
	for _, d := range tree {
		if d.pgid == d.pid && d.pgid != pid && d.pgid > 1 {
			_ = signalGroup(d.pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
		killed = append(killed, d.pid)
	}
	return killed
}
