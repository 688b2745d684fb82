package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/procgroup"
)

// How long an interrupt takes to end a command that ignores SIGTERM,
// children's children included: -grace (400 ms here) and a little. The
// bound is measured here rather than asserted in a test, which a loaded
// machine would turn red; TestRunInterruptEndsTheCommandsWholeGroup
// proves that it ends at all.
//
//	go test ./cmd/bandonce -run '^$' -bench RunInterrupt -benchtime 5x
func BenchmarkRunInterruptEndsTheCommandsWholeGroup(b *testing.B) {
	bin, w := bandonceBin(b), newRunWorld(b)
	pids := filepath.Join(b.TempDir(), "pids")
	const grace = 400 * time.Millisecond
	p := start(b, w.env("PIDS="+pids), bin, "run", "-grace", grace.String(), "--", testdata(b, "stubborn.sh"))
	var total time.Duration
	seen := 0
	for b.Loop() {
		id := w.say(b, "work slowly")
		var group []int
		eventually(b, "the command and its children", func() bool {
			all := readPids(b, pids)
			if len(all) < seen+4 {
				return false
			}
			group = all[seen : seen+4]
			return true
		})
		seen += 4
		if err := w.band.Interrupt(w.agent.ID, w.room.ID); err != nil {
			b.Fatal(err)
		}
		at := time.Now()
		eventually(b, "the command's group gone", func() bool { return len(procgroup.Alive(group)) == 0 })
		total += time.Since(at)
		eventually(b, "the interrupted message consumed", func() bool { return w.band.Status(w.agent.ID, id) == fakeband.StatusProcessed })
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-interrupt-to-gone/op")
	b.ReportMetric(float64(grace.Milliseconds()), "ms-grace")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	p.wait(b, 10*time.Second)
}
