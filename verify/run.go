package verify

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/band-once/bandonce/proof"
)

// trial is one schedule to run: the engine's schedule, the external
// system's plan, and, for the supersede check, how many requests the first
// instance sends with its socket up before a newer connection takes over.
type trial struct {
	sched     *proof.Schedule
	ext       externalPlan
	supersede int
}

// outcome is one run of a trial, judged.
type outcome struct {
	res proof.Result
	obs *observation
	v   *verdict
}

// runner runs trials of one agent under one configuration.
type runner struct {
	cfg *config
	f   Factory
	tt  *testing.T
}

// simulate runs the trial in its own synctest bubble and judges it.
func (r *runner) simulate(tr trial) outcome {
	var obs *observation
	opts := proof.Options{
		MaxAttempts:     r.cfg.maxAttempts,
		RepliesOptional: r.cfg.mayNotReply,
		Agent: func(*proof.Schedule) (proof.Factory, func()) {
			obs = newObservation(tr.ext)
			obs.durable = r.cfg.durable
			if tr.supersede > 0 {
				return obs.superviseFactory(r.f, tr.supersede), nil
			}
			return obs.factory(r.f), nil
		},
		KeyOf:      func(id string, spec proof.MessageSpec) string { return obs.keyOf(id, spec) },
		Busy:       func(life int, room string, tick int64) bool { return obs.busy(life, room, tick) },
		TurnEffect: func(key string) bool { return obs.isEffectKey(key) },
	}
	res := proof.Simulate(r.tt, tr.sched, opts)
	if obs == nil { // the engine failed before the agent was built
		obs = newObservation(tr.ext)
	}
	obs.useLabels(res.Said)
	return outcome{res: res, obs: obs, v: judge(r.cfg, res, obs)}
}

// checkRun is what running one check's schedules found.
type checkRun struct {
	schedules int // run, up to and including the first violating one
	first     *indexedOutcome
	notes     []string
	effects   bool // some run saw the agent call the external system
}

type indexedOutcome struct {
	i     int
	seed  int64
	trial trial
	out   outcome
}

// runSchedules runs the check's n schedules on GOMAXPROCS workers and
// returns the violation with the lowest index. Every schedule below it is
// run, so the answer does not depend on scheduling.
func (r *runner) runSchedules(d *checkDef, n int) checkRun {
	var next atomic.Int64
	var limit atomic.Int64
	limit.Store(int64(n))
	var mu sync.Mutex
	var bad []*indexedOutcome
	notes := make([][]string, n)
	effects := make([]bool, n)
	results := make([]proof.Result, n)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if int64(i) >= limit.Load() {
					return
				}
				seed := r.cfg.seed + int64(i)
				b := newBuilder(seed, d.name, r)
				tr := d.build(b)
				out := r.simulate(tr)
				calls, _ := out.obs.world.snapshot()
				notes[i] = append(b.sortedNotes(), out.obs.sortedNotes()...)
				effects[i] = len(calls) > 0 || b.sawEffects
				results[i] = proof.Result{Signals: out.res.Signals}
				if out.v == nil {
					continue
				}
				mu.Lock()
				bad = append(bad, &indexedOutcome{i: i, seed: seed, trial: tr, out: out})
				mu.Unlock()
				for {
					cur := limit.Load()
					if int64(i) >= cur || limit.CompareAndSwap(cur, int64(i)) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	run := checkRun{schedules: n}
	if len(bad) > 0 {
		sort.Slice(bad, func(a, b int) bool { return bad[a].i < bad[b].i })
		run.first = bad[0]
		run.schedules = bad[0].i + 1
	}
	seen := map[string]bool{}
	for i := range run.schedules {
		run.effects = run.effects || effects[i]
		for _, note := range notes[i] {
			if !seen[note] {
				seen[note] = true
				run.notes = append(run.notes, note)
			}
		}
	}
	if d.control {
		if note := unheard(results[:run.schedules]); note != "" {
			run.notes = append(run.notes, note)
		}
	}
	sort.Strings(run.notes)
	return run
}
