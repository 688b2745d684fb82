//go:build unix

package boltledger

import (
	"os"
	"syscall"
)

// unlock drops the flock bbolt took on f.
func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
