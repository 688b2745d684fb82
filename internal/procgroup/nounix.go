//go:build !unix

package procgroup

import (
	"errors"
	"os/exec"
	"syscall"
)

type procEntry struct{ pid, ppid, pgid int }

func configure(*exec.Cmd, Options) error    { return ErrUnsupported }
func signalGroup(int, syscall.Signal) error { return ErrUnsupported }
func killTree(int, []procEntry) []int       { return nil }
func descendants(int) []procEntry           { return nil }

// Alive cannot tell off Unix; it returns nil.
func Alive([]int) []int { return nil }

// GroupMembers cannot tell off Unix; it returns nil.
func GroupMembers(int) []int { return nil }

// BecomeSubreaper is Linux only.
func BecomeSubreaper() error { return errors.ErrUnsupported }

// ReapOrphans does nothing off Unix.
func ReapOrphans() int { return 0 }
