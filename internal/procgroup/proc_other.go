//go:build unix && !linux

package procgroup

import (
	"errors"
	"syscall"
)

// Off Linux there is no /proc to walk: Kill reaches the leader's group
// only, and there is no orphan sweep.

func setDeathSignal(*syscall.SysProcAttr) {}

type procEntry struct {
	pid, ppid, pgid int
	start           uint64
}

func descendants(int) []procEntry { return nil }

func readStat(int) (procEntry, bool) { return procEntry{}, false }

// Alive returns the pids of pids that still exist (zombies included).
func Alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			out = append(out, pid)
		}
	}
	return out
}

// GroupMembers cannot list a group off Linux; it returns nil.
func GroupMembers(int) []int { return nil }

// BecomeSubreaper is Linux only.
func BecomeSubreaper() error { return errors.ErrUnsupported }

// ReapOrphans does nothing off Linux.
func ReapOrphans() int { return 0 }
