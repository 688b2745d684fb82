package proof

import (
	"runtime/debug"
	"syscall"
	"testing"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestScratchCPU(t *testing.T) {
	debug.SetGCPercent(800)
	for i := 0; i < 3; i++ {
		c0 := cpu()
		cfg := RunConfig{Workers: 2, Engine: Options{}.withDefaults()}
		runEach(t, cfg, 2000, func(i int) *Schedule { return Random(20260616+int64(i), GenOptions{}) }, nil)
		t.Logf("%v cpu/schedule", (cpu()-c0)/2000)
	}
}
