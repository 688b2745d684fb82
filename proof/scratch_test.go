package proof

import (
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestScratchWorkers(t *testing.T) {
	debug.SetGCPercent(800)
	w, _ := strconv.Atoi(os.Getenv("W"))
	c0, w0 := cpu(), time.Now()
	cfg := RunConfig{Workers: w, Engine: Options{}.withDefaults()}
	runEach(t, cfg, 3000, func(i int) *Schedule { return Random(20260616+int64(i), GenOptions{}) }, nil)
	t.Logf("workers %d: %v cpu/schedule, %v wall/schedule, util %.2f", w, (cpu()-c0)/3000, time.Since(w0)/3000, float64(cpu()-c0)/float64(time.Since(w0)))
}
