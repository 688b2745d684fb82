package proof

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/band-once/bandonce/internal/receipt"
)

// Report is the prover's receipt: what ran, what fired, what was checked,
// and whether exactly-once held. Two runs with the same seed and flags
// give the same report apart from WallTime and the rates.
type Report struct {
	// MasterSeed seeds the run; Mode says which schedules it ran and
	// Schedules how many.
	MasterSeed int64  `json:"master_seed"`
	Mode       string `json:"mode"`
	Schedules  int    `json:"schedules"`
	// MasterSeeds are every master seed run (MasterSeed is the first),
	// each with SchedulesPerSeed schedules.
	MasterSeeds      []int64 `json:"master_seeds"`
	SchedulesPerSeed int     `json:"schedules_per_seed"`
	// GoVersion, Module, ModuleVersion and Revision say what was built.
	GoVersion     string `json:"go_version"`
	Module        string `json:"module"`
	ModuleVersion string `json:"module_version"`
	Revision      string `json:"vcs_revision"`
	// Ledger describes the agent's ledger; Durable counts the schedules
	// that kept one across kills.
	Ledger  string `json:"ledger"`
	Durable int    `json:"durable_schedules"`
	// Faults counts the faults and control actions that fired.
	Faults map[string]int `json:"faults_triggered"`
	// Invariants says how often each invariant was checked and failed.
	Invariants []InvariantCount `json:"invariants"`
	// Messages, Replies, Requests and Lives are totals from the fake's
	// ground truth and the engine: human messages, agent replies, HTTP
	// requests Band received, agent lives started.
	Messages int `json:"messages"`
	Replies  int `json:"replies"`
	Requests int `json:"http_requests"`
	Lives    int `json:"agent_lives"`
	// DoublePosts counts replies beyond the first for a key;
	// LostMessages the messages left pending or without their due reply.
	DoublePosts  int `json:"double_posts"`
	LostMessages int `json:"lost_messages"`
	// Interrupted counts the messages an interrupt consumed before their
	// due reply: an interrupt applies to the turn in flight when its push
	// reaches the agent, since the push names no turn.
	Interrupted int `json:"interrupted_messages"`
	// Replicas describes a run whose schedules ran replicas (nil for
	// one that ran none).
	Replicas *ReplicaReport `json:"replicas,omitempty"`
	// Exhaustive says what an exhaustive run enumerated.
	Exhaustive *Coverage `json:"exhaustive,omitempty"`
	// Violating counts the schedules that broke an invariant; First is
	// the one with the lowest index, shrunk.
	Violating int      `json:"violating_schedules"`
	First     *Failure `json:"first_violation,omitempty"`
	// WallSeconds and the rates are the only figures that differ
	// between two runs with the same flags.
	WallSeconds   float64 `json:"wall_seconds"`
	SchedulesPerS float64 `json:"schedules_per_second"`
	RequestsPerS  float64 `json:"requests_per_second"`
	// Replay is the command line that reruns this run.
	Replay string `json:"replay"`
	// Held is true when every schedule kept every invariant.
	Held bool `json:"held"`
	// Lines has one line per schedule when the run was verbose.
	Lines []string `json:"-"`

	replicas int           // per schedule, from the run's GenOptions
	noSkew   bool          // the run's GenOptions.NoSkew
	lease    time.Duration // the replicas' lease, from its Options
}

// ReplicaReport sums up the schedules that ran replicas.
type ReplicaReport struct {
	// Schedules ran Replicas replicas each, with a lease of LeaseSeconds
	// and clocks skewed within MaxSkewPPM.
	Schedules    int     `json:"schedules"`
	Replicas     int     `json:"replicas_per_schedule"`
	LeaseSeconds float64 `json:"lease_seconds"`
	MaxSkewPPM   int     `json:"max_skew_ppm"`
	// Death and Handover are the failovers timed after the holder's
	// death and after a graceful hand-over.
	Death    FailoverStats `json:"failover_after_death"`
	Handover FailoverStats `json:"failover_after_handover"`
}

// FailoverStats are the failovers of one kind: how many were timed,
// their median, 99th percentile and slowest (in seconds of virtual time),
// over those held to the bar, and how many were excused from it (the
// ledger was down, the holder paused, no other replica running).
type FailoverStats struct {
	Count   int     `json:"count"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
	Excused int     `json:"excused"`
	// Bar is what every failover held to it must stay under, in seconds.
	Bar float64 `json:"bar_seconds"`
}

func failoverStats(all []Failover, kind string, bar time.Duration) FailoverStats {
	var took []time.Duration
	st := FailoverStats{Bar: bar.Seconds()}
	for _, f := range all {
		switch {
		case f.Kind != kind:
		case f.Excused != "":
			st.Excused++
		default:
			took = append(took, f.Took)
		}
	}
	slices.Sort(took)
	st.Count = len(took)
	if n := len(took); n > 0 {
		at := func(q float64) float64 { return took[min(n-1, int(q*float64(n)))].Seconds() }
		st.P50, st.P99, st.Max = at(0.50), at(0.99), took[n-1].Seconds()
	}
	return st
}

func (st FailoverStats) line() string {
	if st.Count == 0 {
		return fmt.Sprintf("none timed (%d excused)", st.Excused)
	}
	return fmt.Sprintf("n=%d p50 %.3fs p99 %.3fs max %.3fs (bar: under %gs), %d excused", st.Count, st.P50, st.P99, st.Max, st.Bar, st.Excused)
}

// InvariantCount is how often one invariant was checked and failed.
type InvariantCount struct {
	Name Invariant `json:"name"`
	// Checked counts the cases judged; Violated those that failed.
	Checked  int `json:"checked"`
	Violated int `json:"violated"`
}

// Failure is the first violation, shrunk to a minimal witness.
type Failure struct {
	// Seed and Schedule identify the violating schedule; Invariant and
	// Reason say what broke, as the witness shows it.
	Seed      int64     `json:"seed"`
	Schedule  string    `json:"schedule"`
	Invariant Invariant `json:"invariant"`
	Reason    string    `json:"reason"`
	// Witness is the shrunk schedule, one event a line; WitnessOf says
	// how many events it was shrunk from.
	Witness   []string `json:"witness"`
	WitnessOf int      `json:"witness_shrunk_from"`
	// Setting is the witness's rooms and ledger; Replay the command that
	// reruns the violating schedule.
	Setting string `json:"setting"`
	Replay  string `json:"replay"`
}

func newReport(cfg RunConfig) *Report {
	build := receipt.ReadBuild()
	r := &Report{MasterSeed: cfg.Seed, MasterSeeds: []int64{cfg.Seed}, GoVersion: build.GoVersion, Ledger: cfg.Ledger,
		replicas: cfg.Gen.Replicas, lease: cfg.Engine.LeaseTime, noSkew: cfg.Gen.NoSkew}
	if !cfg.Exhaustive {
		r.MasterSeeds, r.SchedulesPerSeed = cfg.masterSeeds(), cfg.Schedules
		r.MasterSeed = r.MasterSeeds[0]
	}
	r.Module, r.ModuleVersion, r.Revision = build.Module, build.Version, build.Revision
	if build.Modified {
		r.Revision += " (modified)"
	}
	if r.Revision == "unknown" && cfg.Revision != "" {
		r.Revision = cfg.Revision + " (read from .git: the binary has no VCS stamp)"
	}
	if cfg.Exhaustive {
		r.Mode = fmt.Sprintf("exhaustive: every single and double kill point (both kinds) over 1 room, 1–%d messages", min(max(cfg.ExhaustiveMessages, 0), 3))
		if cfg.ExhaustiveMessages <= 0 {
			r.Mode = "exhaustive: every single and double kill point (both kinds) over 1 room, 1–3 messages"
		}
		r.Replay = replayCommand(cfg, 0, cfg.Seed)
	} else {
		g := cfg.Gen.withDefaults()
		r.Mode = fmt.Sprintf("random: %d–%d rooms, %d–%d messages each, up to %d faults or control actions",
			g.MinRooms, g.MaxRooms, g.MinMessages, g.MaxMessages, g.MaxFaults)
		r.Replay = replayCommand(cfg, cfg.Schedules, r.MasterSeeds...)
	}
	return r
}

// replayCommand is the command line that reruns the run (or one
// schedule of it) from its master seeds.
func replayCommand(cfg RunConfig, schedules int, seeds ...int64) string {
	list := make([]string, len(seeds))
	for i, s := range seeds {
		list[i] = fmt.Sprint(s)
	}
	cmd := "go run ./cmd/proof -seed " + strings.Join(list, ",")
	if cfg.Exhaustive {
		cmd += " -exhaustive"
	} else {
		cmd += fmt.Sprintf(" -schedules %d", schedules)
	}
	if cfg.ReplayFlags != "" {
		cmd += " " + cfg.ReplayFlags
	}
	return cmd
}

func (r *Report) add(a *aggregate) {
	r.Schedules = a.schedules
	r.Faults = a.faults
	names := append([]Invariant(nil), Invariants...)
	if a.replicated > 0 {
		names = append(names, ReplicaInvariants...)
	}
	var custom []Invariant
	for inv := range a.checks {
		if !slices.Contains(names, inv) && !slices.Contains(ReplicaInvariants, inv) {
			custom = append(custom, inv)
		}
	}
	slices.Sort(custom)
	for _, inv := range append(names, custom...) {
		r.Invariants = append(r.Invariants, InvariantCount{Name: inv, Checked: a.checks[inv], Violated: a.violations[inv]})
	}
	r.Messages, r.Replies, r.Requests, r.Lives = a.messages, a.replies, a.requests, a.lives
	r.DoublePosts, r.LostMessages, r.Violating, r.Durable = a.doublePosts, a.lost, a.violating, a.durable
	r.Interrupted = a.interrupted
	if a.replicated > 0 {
		lease := cmp.Or(r.lease, DefaultLeaseTime)
		skew := MaxSkewPPM
		if r.noSkew {
			skew = 0
		}
		r.Replicas = &ReplicaReport{Schedules: a.replicated, Replicas: r.replicas, LeaseSeconds: lease.Seconds(), MaxSkewPPM: skew,
			Death:    failoverStats(a.failovers, "death", deathBar(lease)),
			Handover: failoverStats(a.failovers, "handover", handoverBar)}
	}
	for _, l := range a.lines {
		r.Lines = append(r.Lines, l.line)
	}
}

func (r *Report) finish(wall time.Duration) {
	r.WallSeconds = wall.Seconds()
	if wall > 0 {
		r.SchedulesPerS = float64(r.Schedules) / wall.Seconds()
		r.RequestsPerS = float64(r.Requests) / wall.Seconds()
	}
	r.Held = r.Violating == 0 && r.Schedules > 0
}

// describeFailure shrinks the first violating schedule into a witness.
func describeFailure(t *testing.T, cfg RunConfig, bad *Result) *Failure {
	v := bad.Violation
	small, res := Shrink(t, bad.Schedule, cfg.Engine, v.Invariant, cfg.ShrinkBudget)
	f := &Failure{
		Seed: bad.Schedule.Seed, Schedule: bad.Schedule.Name, Invariant: v.Invariant, Reason: v.Reason,
		WitnessOf: len(bad.Schedule.Events),
		Replay:    replayCommand(cfg, 1, bad.Schedule.Seed),
	}
	if cfg.Exhaustive {
		f.Replay = replayCommand(cfg, 0, cfg.Seed)
	}
	if res.Violation != nil {
		f.Reason = res.Violation.Reason // the reason as the witness shows it
	}
	ledger := "a fresh ledger every life"
	if small.Durable {
		ledger = "a durable ledger kept across lives"
	}
	if small.Replicas >= 2 {
		ledger = fmt.Sprintf("%d replicas sharing one leased ledger, clock skews %v ppm", small.Replicas, small.Skew)
	}
	f.Setting = fmt.Sprintf("%d room(s), %s", small.Rooms, ledger)
	for _, e := range small.Events {
		f.Witness = append(f.Witness, e.String())
	}
	return f
}

// FinalLine is the receipt's last line.
func (r *Report) FinalLine() string {
	across := fmt.Sprintf("%d schedules", r.Schedules)
	if n := len(r.MasterSeeds); n > 1 {
		across += fmt.Sprintf(" from %d master seeds", n)
	}
	if r.Held {
		return fmt.Sprintf("exactly-once held across %s: %d double-posts, %d lost messages", across, r.DoublePosts, r.LostMessages)
	}
	return fmt.Sprintf("exactly-once did NOT hold across %s: %d double-posts, %d lost messages, %d schedules violated an invariant",
		across, r.DoublePosts, r.LostMessages, r.Violating)
}

// timingPrefixes mark the receipt's lines that depend on the machine.
var timingPrefixes = []string{"wall time", "throughput"}

// IsTimingLine reports whether a receipt line is one of the timing lines,
// the only lines that differ between two runs with the same seed.
func IsTimingLine(line string) bool {
	for _, p := range timingPrefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// WriteText writes the receipt as text.
func (r *Report) WriteText(w io.Writer) error {
	var t receipt.Text
	row := t.Row
	t.Line("band-once kill-storm prover: receipt")
	if len(r.MasterSeeds) > 1 {
		seeds := make([]string, len(r.MasterSeeds))
		for i, s := range r.MasterSeeds {
			seeds[i] = fmt.Sprint(s)
		}
		row("master seeds", "%s", strings.Join(seeds, ", "))
		row("mode", "%s", r.Mode)
		row("schedules", "%d (%d per master seed)", r.Schedules, r.SchedulesPerSeed)
	} else {
		row("master seed", "%d", r.MasterSeed)
		row("mode", "%s", r.Mode)
		row("schedules", "%d", r.Schedules)
	}
	row("go", "%s", r.GoVersion)
	row("module", "%s %s, revision %s", r.Module, r.ModuleVersion, r.Revision)
	row("ledger", "%s", r.Ledger)
	row("", "%d of %d schedules kept a durable ledger across kills", r.Durable, r.Schedules)
	t.Faults(r.Faults)
	t.RulesHeader("invariants")
	for _, c := range r.Invariants {
		t.Rule(string(c.Name), c.Checked, c.Violated)
	}
	if p := r.Replicas; p != nil {
		skew := fmt.Sprintf("clocks skewed within ±%g%%", float64(p.MaxSkewPPM)/1e4)
		if p.MaxSkewPPM == 0 {
			skew = "clocks not skewed"
		}
		row("replicas", "%d of %d schedules ran %d replicas on one leased ledger: lease %gs, %s",
			p.Schedules, r.Schedules, p.Replicas, p.LeaseSeconds, skew)
		row("failover", "after a death:       %s", p.Death.line())
		row("", "after a hand-over:   %s", p.Handover.line())
	}
	row("totals", "%d messages, %d replies, %d HTTP requests, %d agent lives", r.Messages, r.Replies, r.Requests, r.Lives)
	row("interrupted", "%d messages consumed unanswered by an interrupt that reached their turn", r.Interrupted)
	row("", "(a push names no turn: it applies to the one in flight when it arrives)")
	if c := r.Exhaustive; c != nil {
		row("exhaustive coverage", "%d distinct schedules: %d baselines, %d single-kill, %d double-kill over %d kill points",
			c.Total, c.Baselines, c.Singles, c.Pairs, c.KillPoints)
		row("", "%d kills at a request, %d at a stall (a new life waiting out the settle window)", c.RequestKills, c.StallKills)
		for _, name := range c.Configurations {
			row("", "%s", name)
		}
	} else {
		row("exhaustive coverage", "not run (add -exhaustive)")
	}
	if f := r.First; f != nil {
		row("violating schedules", "%d of %d", r.Violating, r.Schedules)
		row("first violation", "seed %d (%s): %s: %s", f.Seed, f.Schedule, f.Invariant, f.Reason)
		row("minimal witness", "%d of %d events; %s", len(f.Witness), f.WitnessOf, f.Setting)
		for i, w := range f.Witness {
			row("", "%d. %s", i+1, w)
		}
		row("replay it", "%s", f.Replay)
	}
	row("wall time", "%.2fs", r.WallSeconds)
	row("throughput", "%.0f schedules/s, %.0f requests/s", r.SchedulesPerS, r.RequestsPerS)
	row("replay", "%s", r.Replay)
	t.Line(r.FinalLine())
	_, err := t.WriteTo(w)
	return err
}

// WriteJSON writes the receipt as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return receipt.WriteJSON(w, r) }
