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
	// sequence (up to quiet), summed: the single kill points per kind.
	KillPoints int `json:"kill_points"`
	// Baselines, Singles and Pairs count the schedules with no kill,
	// one kill and two kills (both kinds at every point).
	Baselines int `json:"baselines"`
	Singles   int `json:"single_kill_schedules"`
	Pairs     int `json:"double_kill_schedules"`
	// Total is every schedule run; all are distinct.
	Total int `json:"schedules"`
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
// first kill produced.
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

	baselines := make([]*Schedule, len(configs))
	lengths := make([]int, len(configs))
	for i, c := range configs {
		baselines[i] = c.schedule(cfg.Seed)
	}
	phase(baselines, func(i int, r Result) { lengths[i] = r.QuietAt })
	cov.Baselines = len(baselines)

	type single struct {
		config int
		kill   Event
		quiet  int
	}
	var singles []*single
	var list []*Schedule
	for ci, c := range configs {
		cov.KillPoints += lengths[ci]
		for k := 1; k <= lengths[ci]; k++ {
			for _, kind := range kinds {
				ev := Event{At: k, Kind: kind}
				singles = append(singles, &single{config: ci, kill: ev})
				list = append(list, c.schedule(cfg.Seed, ev))
			}
		}
	}
	phase(list, func(i int, r Result) { singles[i].quiet = r.QuietAt })
	cov.Singles = len(list)

	list = nil
	for _, s := range singles {
		for k := s.kill.At + 1; k <= s.quiet; k++ {
			for _, kind := range kinds {
				list = append(list, configs[s.config].schedule(cfg.Seed, s.kill, Event{At: k, Kind: kind}))
			}
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
