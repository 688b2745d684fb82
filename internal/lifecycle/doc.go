// Package lifecycle holds the shell's lifecycle decisions as pure
// functions: no goroutines, no clock, no I/O. The shell performs what these
// functions decide, so every edge of the lifecycle can be tested in a table.
package lifecycle
