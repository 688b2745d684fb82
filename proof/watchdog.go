package proof

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Two watchdogs keep a schedule from hanging without a verdict. An agent
// that never waits on a timer between requests never lets virtual time
// advance: the driver counts the requests released at one instant and
// fails the schedule at busyLimit (see noteRelease). An agent that spins
// without blocking at all (no request, no timer, no channel) keeps the
// driver from taking its next step, and nothing inside the bubble can stop
// it; the wall-clock watchdog below then ends the test binary with the
// reason, rather than leave it hanging until its timeout with none.

// stallWall is how long (wall time) the driver may go without taking a
// step. A step waits for every goroutine of the bubble to block, which
// takes microseconds for an agent that blocks at all.
const stallWall = 2 * time.Minute

// watchSteps panics, outside the bubble, if steps has not moved for
// limit, until stop is closed. It writes the reason to w first, so it
// shows even when the panic's is lost among the goroutine dump.
func watchSteps(name string, steps *atomic.Int64, stop <-chan struct{}, limit time.Duration, w io.Writer) {
	check := time.NewTicker(limit / 8)
	defer check.Stop()
	last, since := steps.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-check.C:
			if n := steps.Load(); n != last {
				last, since = n, now
				continue
			}
			if now.Sub(since) >= limit {
				msg := fmt.Sprintf("proof: schedule %q: the agent has kept the simulation from taking a step for %s of wall time: "+
					"a goroutine of it spins without ever blocking (no request, no timer, no channel), so virtual time cannot advance "+
					"and no verdict is possible; give the loop a pause (a timer) when it has nothing to do", name, limit)
				fmt.Fprintln(w, msg)
				panic(msg)
			}
		}
	}
}
