package procverify

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/band-once/bandonce/internal/receipt"
)

// Report is the verifier's receipt: what ran against which command, what
// fired, what was judged, and whether every rule held.
type Report struct {
	// Command is the agent as it was run.
	Command string `json:"command"`
	// MasterSeed seeds the run; Checks names the checks run, each with
	// SchedulesPerCheck schedules, Schedules in all.
	MasterSeed        int64    `json:"master_seed"`
	Checks            []string `json:"checks"`
	SchedulesPerCheck int      `json:"schedules_per_check"`
	Schedules         int      `json:"schedules"`
	// Capabilities are the agent's declared capabilities.
	Capabilities string `json:"capabilities"`
	// Replicas is how many copies of the agent ran at once (0: one at a
	// time), told LeaseTime as BANDONCE_LEASE_TIME.
	Replicas  int    `json:"replicas,omitempty"`
	LeaseTime string `json:"lease_time,omitempty"`
	// Failover sums up, by cause (FailoverDeath, FailoverPause,
	// FailoverHandOver), how long the replicas took to fail over.
	Failover map[string]FailoverStats `json:"failover,omitempty"`
	// GoVersion, Module and Revision say what verified it.
	GoVersion string `json:"go_version"`
	Module    string `json:"module"`
	Revision  string `json:"vcs_revision"`
	// Faults counts the faults and signals that fired.
	Faults map[string]int `json:"faults_triggered"`
	// Invariants says how often each rule was judged and failed.
	Invariants []InvariantCount `json:"invariants"`
	// Withheld lists the variables of the verifier's environment the
	// agent did not get (a Band SDK's, a URL off loopback), by name.
	Withheld []Withheld `json:"withheld_env"`
	// NotExercised lists what could not be exercised, and why.
	NotExercised []string `json:"not_exercised"`
	// Totals from the fake's ground truth and the engine.
	Messages     int `json:"messages"`
	Replies      int `json:"replies"`
	Requests     int `json:"http_requests"`
	Lives        int `json:"agent_lives"`
	DoublePosts  int `json:"double_posts"`
	LostMessages int `json:"lost_messages"`
	Interrupted  int `json:"interrupted_messages"`
	// Violating counts the schedules that broke a rule, and
	// ViolatingSchedules lists each of them, in the order they were
	// drawn; First is the first of them, shrunk.
	Violating          int                 `json:"violating_schedules"`
	ViolatingSchedules []ViolatingSchedule `json:"violations"`
	First              *Failure            `json:"first_violation,omitempty"`
	// WallSeconds and SchedulesPerS are the run's wall time and rate.
	WallSeconds   float64 `json:"wall_seconds"`
	SchedulesPerS float64 `json:"schedules_per_second"`
	// Replay reruns the whole run.
	Replay string `json:"replay"`
	// Held is true when every schedule kept every rule.
	Held bool `json:"held"`
}

// FailoverStats are the failovers after one cause: how many, and their
// median, 99th percentile (nearest rank) and longest, in seconds.
type FailoverStats struct {
	Count      int     `json:"count"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
	MaxSeconds float64 `json:"max_seconds"`
}

// failoverCauses are the causes the receipt reports, in its order.
var failoverCauses = []string{FailoverDeath, FailoverPause, FailoverHandOver}

func failoverStats(ds []time.Duration) FailoverStats {
	if len(ds) == 0 {
		return FailoverStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p/100*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return FailoverStats{Count: len(s), P50Seconds: rank(50).Seconds(), P99Seconds: rank(99).Seconds(), MaxSeconds: s[len(s)-1].Seconds()}
}

// InvariantCount is how often one rule was judged and failed.
type InvariantCount struct {
	Name     Invariant `json:"name"`
	Checked  int       `json:"checked"`
	Violated int       `json:"violated"`
}

// ViolatingSchedule is one schedule that broke a rule: every rule it
// broke, in judging order, and the command that replays it alone. A real
// process is not exactly repeatable, so a rerun of one seed may break
// other rules, or none; each is listed as it was seen.
type ViolatingSchedule struct {
	Check  string       `json:"check"`
	Seed   int64        `json:"seed"`
	Rules  []BrokenRule `json:"rules"`
	Replay string       `json:"replay"`
}

// BrokenRule is a rule a schedule broke, with the first reason it failed.
type BrokenRule struct {
	Rule   Invariant `json:"rule"`
	Reason string    `json:"reason"`
}

// Failure is the first violation, shrunk to a minimal witness.
type Failure struct {
	// Check and Seed name the violating schedule; Invariant and Reason
	// say what broke, as the witness showed it.
	Check     string    `json:"check"`
	Seed      int64     `json:"seed"`
	Invariant Invariant `json:"invariant"`
	Reason    string    `json:"reason"`
	// Witness is the shrunk schedule, one event a line, in Setting;
	// WitnessOf is how many events it was shrunk from, in ShrinkRuns runs.
	Witness    []string `json:"witness"`
	WitnessOf  int      `json:"witness_shrunk_from"`
	ShrinkRuns int      `json:"shrink_runs"`
	Setting    string   `json:"setting"`
	// Replay reruns the violating schedule alone.
	Replay string `json:"replay"`
	// Output is the last lines the agent wrote in the witness's run.
	Output []string `json:"agent_output,omitempty"`
}

func newReport(s *settings) *Report {
	build := receipt.ReadBuild()
	r := &Report{
		Command: ShellQuote(s.Command), MasterSeed: s.Seed, SchedulesPerCheck: s.Schedules,
		GoVersion: build.GoVersion, Module: build.Module, Revision: build.Revision,
		Faults: map[string]int{}, Replay: s.replay("", s.Seed, s.Schedules),
		ViolatingSchedules: []ViolatingSchedule{},
	}
	_, r.Withheld = agentBase(os.Environ())
	if r.Withheld == nil {
		r.Withheld = []Withheld{}
	}
	for _, c := range Checks {
		if (len(s.Checks) == 0 || slices.Contains(s.Checks, c.Name)) && !(c.Socket && s.NoSocket) && !(c.Replicas && s.Replicas < 2) {
			r.Checks = append(r.Checks, c.Name)
		}
	}
	socket := "socket (control signals, supersede)"
	if s.NoSocket {
		socket = "no socket (-no-socket)"
	}
	replies := "answers every message"
	if s.MayNotReply {
		replies = "may consume a message without a reply (-may-not-reply)"
	}
	r.Capabilities = socket + "; " + replies
	if s.Replicas >= 2 {
		r.Replicas, r.LeaseTime = s.Replicas, s.LeaseTime.String()
		r.Capabilities += fmt.Sprintf("; runs as %d replicas on one PostgreSQL (-replicas)", s.Replicas)
		r.Failover = map[string]FailoverStats{}
	}
	return r
}

// add folds the schedules' results in.
func (r *Report) add(s *settings, results []Result) {
	checks, violated := map[Invariant]int{}, map[Invariant]int{}
	sockets := false
	notes := map[string]bool{}
	took := map[string][]time.Duration{}
	for _, res := range results {
		for _, f := range res.Failovers {
			took[f.Cause] = append(took[f.Cause], f.Took)
		}
		r.Schedules++
		receipt.AddCounts(checks, res.Checks)
		receipt.AddCounts(violated, res.Violations)
		receipt.AddCounts(r.Faults, res.Faults)
		r.Messages += res.Messages
		r.Replies += res.Replies
		r.Requests += res.Requests
		r.Lives += res.Lives
		r.DoublePosts += res.DoublePosts
		r.LostMessages += res.Lost
		r.Interrupted += res.Interrupted
		sockets = sockets || res.Sockets
		if res.Violation != nil {
			r.Violating++
			r.ViolatingSchedules = append(r.ViolatingSchedules, violating(s, res))
		}
		for _, n := range res.NotExercised {
			notes[res.Schedule.Check+": "+n] = true
		}
	}
	if r.Replicas > 0 {
		for _, c := range failoverCauses {
			r.Failover[c] = failoverStats(took[c])
		}
	}
	for _, inv := range Invariants {
		if inv == Fenced && r.Replicas == 0 {
			continue // judged only among replicas
		}
		r.Invariants = append(r.Invariants, InvariantCount{Name: inv, Checked: checks[inv], Violated: violated[inv]})
	}
	if !sockets && !strings.HasPrefix(r.Capabilities, "no socket") && r.Schedules > 0 {
		notes["every check: the agent never opened its socket, so no signal reached it (declare -no-socket if it has none)"] = true
	}
	r.NotExercised = append(r.NotExercised, slices.Sorted(maps.Keys(notes))...)
}

// violating lists what a violating schedule broke.
func violating(s *settings, res Result) ViolatingSchedule {
	v := ViolatingSchedule{Check: res.Schedule.Check, Seed: res.Schedule.Seed, Replay: s.replay(res.Schedule.Check, res.Schedule.Seed, 1)}
	for _, inv := range Invariants {
		if f := res.Found[inv]; f != nil {
			v.Rules = append(v.Rules, BrokenRule{Rule: inv, Reason: f.Reason})
		}
	}
	if len(v.Rules) == 0 { // a Result built without Found
		v.Rules = append(v.Rules, BrokenRule{Rule: res.Violation.Invariant, Reason: res.Violation.Reason})
	}
	return v
}

func (r *Report) finish(wall time.Duration) {
	r.WallSeconds = wall.Seconds()
	if wall > 0 {
		r.SchedulesPerS = float64(r.Schedules) / wall.Seconds()
	}
	r.Held = r.Violating == 0 && r.Schedules > 0
}

// FinalLine is the receipt's last line.
func (r *Report) FinalLine() string {
	if r.Held {
		return fmt.Sprintf("exactly-once held across %d schedules: %d double-posts, %d lost messages", r.Schedules, r.DoublePosts, r.LostMessages)
	}
	return fmt.Sprintf("exactly-once did NOT hold across %d schedules: %d double-posts, %d lost messages, %d schedules violated a rule",
		r.Schedules, r.DoublePosts, r.LostMessages, r.Violating)
}

// WriteText writes the receipt as text.
func (r *Report) WriteText(w io.Writer) error {
	var t receipt.Text
	row := t.Row
	t.Line("bandonce verify: receipt")
	row("agent", "%s", r.Command)
	row("capabilities", "%s", r.Capabilities)
	row("master seed", "%d", r.MasterSeed)
	row("checks", "%s", strings.Join(r.Checks, ", "))
	row("schedules", "%d (%d per check)", r.Schedules, r.SchedulesPerCheck)
	if r.Replicas > 0 {
		row("replicas", "%d at once, lease %s, a database of their own per schedule", r.Replicas, r.LeaseTime)
	}
	row("go", "%s", r.GoVersion)
	row("module", "%s, revision %s", r.Module, r.Revision)
	if len(r.Withheld) == 0 {
		row("withheld env", "nothing")
	}
	for i, w := range r.Withheld {
		k := ""
		if i == 0 {
			k = "withheld env"
		}
		row(k, "%s: %s", w.Name, w.Reason)
	}
	t.Faults(r.Faults)
	t.RulesHeader("rules")
	for _, c := range r.Invariants {
		t.Rule(string(c.Name), c.Checked, c.Violated)
	}
	if len(r.NotExercised) == 0 {
		row("not exercised", "nothing")
	}
	for i, n := range r.NotExercised {
		k := ""
		if i == 0 {
			k = "not exercised"
		}
		row(k, "%s", n)
	}
	row("totals", "%d messages, %d replies, %d HTTP requests, %d agent lives", r.Messages, r.Replies, r.Requests, r.Lives)
	row("interrupted", "%d messages consumed unanswered by an interrupt that reached their turn", r.Interrupted)
	for i, c := range failoverCauses {
		if r.Replicas == 0 {
			break
		}
		k := ""
		if i == 0 {
			k = "failover"
		}
		f := r.Failover[c]
		if f.Count == 0 {
			row(k, "after a %s: none measured", c)
			continue
		}
		row(k, "after a %s: p50 %s, p99 %s, max %s (%d)", c, seconds(f.P50Seconds), seconds(f.P99Seconds), seconds(f.MaxSeconds), f.Count)
	}
	if r.Violating > 0 {
		row("violating schedules", "%d of %d", r.Violating, r.Schedules)
		for _, v := range r.ViolatingSchedules {
			for i, b := range v.Rules {
				if i == 0 {
					row("", "%s, seed %d: %s: %s", v.Check, v.Seed, b.Rule, b.Reason)
				} else {
					row("", "  and %s: %s", b.Rule, b.Reason)
				}
			}
			row("", "  replay: %s", v.Replay)
		}
	}
	if f := r.First; f != nil {
		row("first violation", "%s, seed %d: %s: %s", f.Check, f.Seed, f.Invariant, f.Reason)
		row("minimal witness", "%d of %d events (%d shrinking runs); %s", len(f.Witness), f.WitnessOf, f.ShrinkRuns, f.Setting)
		for i, w := range f.Witness {
			row("", "%d. %s", i+1, w)
		}
		row("", "then SIGTERM, exit 0 expected")
		row("replay it", "%s", f.Replay)
		if len(f.Output) > 0 {
			row("agent output", "(last %d lines of the witness's last life)", len(f.Output))
			for _, line := range f.Output {
				row("", "| %s", line)
			}
		}
	}
	row("wall time", "%.2fs", r.WallSeconds)
	row("throughput", "%.2f schedules/s", r.SchedulesPerS)
	row("replay", "%s", r.Replay)
	t.Line(r.FinalLine())
	_, err := t.WriteTo(w)
	return err
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// WriteJSON writes the receipt as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return receipt.WriteJSON(w, r) }
