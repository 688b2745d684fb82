//go:build !unix

package boltledger

import "os"

// unlock does nothing here: off Unix the lock goes with the file's close.
// (Untested: this package is tested on Linux.)
func unlock(*os.File) {}
