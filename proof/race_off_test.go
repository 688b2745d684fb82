//go:build !race

package proof

// raceEnabled trims the heaviest tests, which the race detector slows
// tenfold.
const raceEnabled = false
