package proof

import (
	"fmt"
	"testing"
)

// Coverage says what an exhaustive run enumerated.
type Coverage struct {
	// Configurations are the message sets tried, one room each.
	Configurations []string `json:"configurations"`
	// KillPoints is the length of every configuration's request
	// sequence (up to quiet, or up to its first stall if earlier: see
	// StallKills), summed: the single kill points per kind.
	KillPoints int `json:"kill_points"`
	// Baselines, Singles and Pairs count the schedules with no kill,
	// one kill and two kills (both kinds at every point).
	Baselines int `json:"baselines"`
	Singles   int `json:"single_kill_schedules"`
	Pairs     int `json:"double_kill_schedules"`
	// Total is every schedule run; all are distinct.
	Total int `json:"schedules"`
	// RequestKills counts the enumerated kills drawn at a request the
	// run reaches, each fired there (kill_before_send, kill_after_apply).
	// StallKills counts those drawn past the point where the run stalls
	// first (no mark or post for a while, as while a new life waits out
	// the settle window): the engine fires such a kill at the stall
	// (kill_idle), whatever its request index and kind, so the
	// enumeration draws one of them per run, not one per later request.
	RequestKills int `json:"request_kills"`
	StallKills   int `json:"stall_kills"`
}

type exhaustiveConfig struct {
	name    string
	specs   []MessageSpec
	durable bool
}

// exhaustiveConfigs are the small worlds the enumeration covers: one
// room, one to three messages; plain replies, then a mix with a shared
// natural key and a failure, each with a forgetful and a durable ledger.
func exhaustiveConfigs(maxMessages int) []exhaustiveConfig {
	if maxMessages <= 0 {
		maxMessages = 3
	}
	var out []exhaustiveConfig
	for _, durable := range []bool{false, true} {
		ledger := "memory"
		if durable {
			ledger = "durable"
		}
		for m := 1; m <= min(maxMessages, 3); m++ {
			var specs []MessageSpec
			for i := range m {
				specs = append(specs, MessageSpec{Label: fmt.Sprintf("r1m%d", i+1), Outcome: Reply})
			}
			out = append(out, exhaustiveConfig{fmt.Sprintf("%d %s, %s ledger", m, plural(m, "reply", "replies"), ledger), specs, durable})
		}
		if maxMessages < 3 {
			continue
		}
		out = append(out, exhaustiveConfig{"shared key, shared key, fails once; " + ledger + " ledger", []MessageSpec{
			{Label: "r1m1", Outcome: Reply, Key: "nk:r1:a"},
			{Label: "r1m2", Outcome: Reply, Key: "nk:r1:a"},
			{Label: "r1m3", Outcome: Reply, Fails: 1},
		}, durable})
	}
	return out
}

func (c exhaustiveConfig) schedule(seed int64, kills ...Event) *Schedule {
	s := &Schedule{Seed: seed, Rooms: 1, Durable: c.durable, Name: "exhaustive: " + c.name}
	for _, spec := range c.specs {
		s.Events = append(s.Events, Event{Kind: Say, Spec: spec})
	}
	for _, k := range kills {
		s.Name += fmt.Sprintf("; %s@%d", k.Kind, k.At)
		s.Events = append(s.Events, k)
	}
	return s
}

// runExhaustive enumerates, for every configuration, the run with no
// kill, every single kill point and every pair of kill points over the
// lifecycle's request sequence, with both kinds of kill. A kill point is
// a request index up to the point the run went quiet; the second kill of
// a pair ranges over the requests after the first in the run that the
// first kill produced. A run that stalls before it is quiet (see
// Result.StallAt) ends its kill points there, and adds one kill at the
// stall.
func runExhaustive(t *testing.T, cfg RunConfig) (*aggregate, Coverage) {
	configs := exhaustiveConfigs(cfg.ExhaustiveMessages)
	var cov Coverage
	for _, c := range configs {
		cov.Configurations = append(cov.Configurations, c.name)
	}
	kinds := []EventKind{KillBefore, KillAfter}
	total := newAggregate()
	offset := 0
	phase := func(list []*Schedule, keep func(i int, r Result)) {
		agg := runEach(t, cfg, len(list), func(i int) *Schedule { return list[i] }, keep)
		agg.firstBadIndex += offset
		for i := range agg.lines {
			agg.lines[i].i += offset
		}
		if agg.firstBad == nil {
			agg.firstBadIndex = -1
		}
		total.merge(agg)
		offset += len(list)
	}
	// points returns the kills to draw after request from in a run whose
	// result is r: both kinds at every request index up to its quiet, or
	// up to its first stall and then one kill at the stall, which the
	// engine fires there (kill_idle) whatever its index and kind.
	points := func(from int, r Result) (kills []Event, requests int) {
		last := r.QuietAt
		if r.StallAt > 0 && r.StallAt < last {
			last = r.StallAt
		}
		for k := from + 1; k <= last; k++ {
			for _, kind := range kinds {
				kills = append(kills, Event{At: k, Kind: kind})
			}
		}
		requests = len(kills)
		if last < r.QuietAt {
			kills = append(kills, Event{At: last + 1, Kind: KillBefore})
		}
		return kills, requests
	}

	baselines := make([]*Schedule, len(configs))
	results := make([]Result, len(configs))
	for i, c := range configs {
		baselines[i] = c.schedule(cfg.Seed)
	}
	phase(baselines, func(i int, r Result) { results[i] = r })
	cov.Baselines = len(baselines)

	type single struct {
		config int
		kill   Event
		stall  bool // the kill is the one at the stall
		after  int  // the requests released when it fires
		result Result
	}
	var singles []*single
	var list []*Schedule
	for ci, c := range configs {
		kills, requests := points(0, results[ci])
		cov.KillPoints += requests / len(kinds)
		cov.RequestKills += requests
		cov.StallKills += len(kills) - requests
		for i, ev := range kills {
			stall := i >= requests
			after := ev.At
			if stall {
				after = ev.At - 1
			}
			singles = append(singles, &single{config: ci, kill: ev, stall: stall, after: after})
			list = append(list, c.schedule(cfg.Seed, ev))
		}
	}
	phase(list, func(i int, r Result) { singles[i].result = r })
	cov.Singles = len(list)

	list = nil
	for _, s := range singles {
		kills, requests := points(s.after, s.result)
		// The second kill of each pair, and its first.
		cov.RequestKills += requests
		cov.StallKills += len(kills) - requests
		if s.stall {
			cov.StallKills += len(kills)
		} else {
			cov.RequestKills += len(kills)
		}
		for _, ev := range kills {
			list = append(list, configs[s.config].schedule(cfg.Seed, s.kill, ev))
		}
	}
	phase(list, nil)
	cov.Pairs = len(list)
	cov.Total = cov.Baselines + cov.Singles + cov.Pairs
	return total, cov
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
