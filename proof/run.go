package proof

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/band-once/bandonce/internal/receipt"
)

// RunConfig is one run of the prover.
type RunConfig struct {
	// Seed is the master seed. Random schedule i has seed Seed+i, so
	// "-seed S+i -schedules 1" replays it alone.
	Seed int64
	// Seeds, if set, are the master seeds to run instead of Seed, each
	// with Schedules random schedules: a receipt that holds for one seed
	// can be luck.
	Seeds []int64
	// Schedules is how many random schedules to run.
	Schedules int
	// Exhaustive runs the exhaustive kill-point enumeration instead of
	// random schedules, over configurations of up to ExhaustiveMessages
	// messages (zero means 3).
	Exhaustive         bool
	ExhaustiveMessages int
	// Workers run schedules in parallel; zero means GOMAXPROCS.
	Workers int
	// Gen shapes the random schedules.
	Gen GenOptions
	// Engine configures every schedule's run.
	Engine Options
	// Ledger describes the agent's ledger for the receipt.
	Ledger string
	// ReplayFlags are flags the replay commands add after -seed and
	// -schedules, e.g. "-ledger bolt".
	ReplayFlags string
	// Revision is the VCS revision to report when the binary carries no
	// VCS stamp (built with -buildvcs=false); "" reports "unknown".
	Revision string
	// Verbose keeps one summary line per schedule in the report.
	Verbose bool
	// Progress, if set, is called now and then with schedules done and
	// the total (0 while the total is not known).
	Progress func(done, total int)
	// ShrinkBudget bounds the re-runs spent shrinking the first
	// violation; zero means 400.
	ShrinkBudget int
}

// Run runs the prover and returns its report. It needs a *testing.T
// because every schedule runs in a synctest bubble; it never fails t.
func Run(t *testing.T, cfg RunConfig) *Report {
	start := time.Now()
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	cfg.Engine = cfg.Engine.withDefaults()
	cfg.Gen.MaxAttempts = cfg.Engine.MaxAttempts
	rep := newReport(cfg)
	var agg *aggregate
	if cfg.Exhaustive {
		var cov Coverage
		agg, cov = runExhaustive(t, cfg)
		rep.Exhaustive = &cov
	} else {
		seeds := cfg.masterSeeds()
		agg = runAll(t, cfg, len(seeds)*cfg.Schedules, func(i int) *Schedule {
			return Random(seeds[i/cfg.Schedules]+int64(i%cfg.Schedules), cfg.Gen)
		})
	}
	rep.add(agg)
	if agg.firstBad != nil {
		rep.First = describeFailure(t, cfg, agg.firstBad)
	}
	rep.finish(time.Since(start))
	return rep
}

// masterSeeds are the master seeds a random run covers.
func (cfg RunConfig) masterSeeds() []int64 {
	if len(cfg.Seeds) > 0 {
		return cfg.Seeds
	}
	return []int64{cfg.Seed}
}

// aggregate sums the results of many schedules; order does not matter,
// except for firstBad, the violating schedule with the lowest index.
type aggregate struct {
	schedules          int
	checks, violations map[Invariant]int
	faults             map[string]int
	messages, replies  int
	requests, lives    int
	doublePosts, lost  int
	interrupted        int
	violating, durable int
	replicated         int
	failovers          []Failover
	firstBad           *Result
	firstBadIndex      int
	lines              []indexedLine
}

type indexedLine struct {
	i    int
	line string
}

func newAggregate() *aggregate {
	return &aggregate{checks: map[Invariant]int{}, violations: map[Invariant]int{}, faults: map[string]int{}, firstBadIndex: -1}
}

// add folds one schedule's result in, as an aggregate of one.
func (a *aggregate) add(i int, r Result, verbose bool) {
	one := &aggregate{
		schedules: 1, checks: r.Checks, violations: r.Violations, faults: r.Faults,
		messages: r.Messages, replies: r.Replies, requests: r.Requests, lives: r.Lives,
		doublePosts: r.DoublePosts, lost: r.Lost, interrupted: r.Interrupted, firstBadIndex: -1,
	}
	if r.Violation != nil {
		one.violating, one.firstBad, one.firstBadIndex = 1, &r, i
	}
	if r.Schedule.Durable {
		one.durable = 1
	}
	if r.Schedule.Replicas >= 2 {
		one.replicated, one.failovers = 1, r.Failovers
	}
	if verbose {
		one.lines = []indexedLine{{i, summaryLine(r)}}
	}
	a.merge(one)
}

func (a *aggregate) merge(b *aggregate) {
	a.schedules += b.schedules
	receipt.AddCounts(a.checks, b.checks)
	receipt.AddCounts(a.violations, b.violations)
	receipt.AddCounts(a.faults, b.faults)
	a.messages += b.messages
	a.replies += b.replies
	a.requests += b.requests
	a.lives += b.lives
	a.doublePosts += b.doublePosts
	a.lost += b.lost
	a.interrupted += b.interrupted
	a.violating += b.violating
	a.durable += b.durable
	a.replicated += b.replicated
	a.failovers = append(a.failovers, b.failovers...)
	if b.firstBad != nil && (a.firstBadIndex < 0 || b.firstBadIndex < a.firstBadIndex) {
		a.firstBad, a.firstBadIndex = b.firstBad, b.firstBadIndex
	}
	a.lines = append(a.lines, b.lines...)
}

func summaryLine(r Result) string {
	verdict := "ok"
	if r.Violation != nil {
		verdict = r.Violation.Error()
	}
	return fmt.Sprintf("%s: rooms=%d messages=%d events=%d requests=%d lives=%d: %s",
		r.Schedule.Name, r.Schedule.Rooms, r.Messages, len(r.Schedule.Events), r.Requests, r.Lives, verdict)
}

// runAll runs n schedules on cfg.Workers goroutines.
func runAll(t *testing.T, cfg RunConfig, n int, schedule func(i int) *Schedule) *aggregate {
	return runEach(t, cfg, n, schedule, nil)
}

// runEach is runAll that also hands every result to keep, under a lock.
func runEach(t *testing.T, cfg RunConfig, n int, schedule func(i int) *Schedule, keep func(i int, r Result)) *aggregate {
	var next, done atomic.Int64
	var mu sync.Mutex
	total := newAggregate()
	var wg sync.WaitGroup
	for range min(cfg.Workers, max(n, 1)) {
		wg.Go(func() {
			mine := newAggregate()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				r := Simulate(t, schedule(i), cfg.Engine)
				mine.add(i, r, cfg.Verbose)
				if keep != nil {
					mu.Lock()
					keep(i, r)
					mu.Unlock()
				}
				if d := done.Add(1); cfg.Progress != nil && d%25 == 0 {
					cfg.Progress(int(d), n)
				}
			}
			mu.Lock()
			total.merge(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(total.lines, func(a, b indexedLine) int { return a.i - b.i })
	return total
}
