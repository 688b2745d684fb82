package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Result is the verdict of a check, or of the whole suite.
type Result struct {
	// OK: every schedule held every rule.
	OK bool
	// Schedules is how many schedules ran: all of them on a pass, up to
	// and including the violating one on a failure.
	Schedules int
	// Check names the check that found the violation.
	Check string
	// FirstViolatingSeed is the seed of the first schedule that broke a
	// rule; Reason names the defect in one clause.
	FirstViolatingSeed int64
	Reason             string
	// Witness is the shrunk schedule that still shows the defect, one
	// event a line, then the external system's plan.
	Witness []string
	// Replay is the command that runs the violating schedule alone.
	Replay string
	// NotApplicable lists, one line each, what the checks could not
	// exercise for this agent and why. Nothing is skipped silently.
	NotApplicable []string
}

// Check is one exported check of the suite.
type Check struct {
	// Name is the check's name, as EnvCheck takes it.
	Name string
	// Doc says in one line what its schedules do.
	Doc string
	// Run runs the check alone.
	Run func(t testing.TB, f Factory, opts ...Option) Result
}

// Checks is the suite ExactlyOnce runs, in order, one Check per exported
// check function (KillBeforePost, KillAfterPost, ...), each with its name
// and what its schedules do.
var Checks []Check

// Checks is filled here so that its documentation shows its type, not the
// package's unexported check definitions.
func init() { Checks = suite }

var suite = []Check{
	{"kill-before-post", defKillBeforePost.doc, KillBeforePost},
	{"kill-after-post", defKillAfterPost.doc, KillAfterPost},
	{"lost-ack", defLostAck.doc, LostAck},
	{"lost-reply", defLostReply.doc, LostReply},
	{"duplicate-delivery", defDuplicateDelivery.doc, DuplicateDelivery},
	{"transient-errors", defTransientErrors.doc, TransientErrors},
	{"handler-errors", defHandlerErrors.doc, HandlerErrors},
	{"natural-keys", defNaturalKeys.doc, NaturalKeys},
	{"look-alikes", defLookAlikes.doc, LookAlikes},
	{"long-room", defLongRoom.doc, LongRoom},
	{"joined-rooms", defJoinedRooms.doc, JoinedRooms},
	{"interrupt", defInterrupt.doc, Interrupt},
	{"stop-and-play", defStopAndPlay.doc, StopAndPlay},
	{"supersede", defSupersede.doc, Supersede},
	{"storm", defStorm.doc, Storm},
}

// ExactlyOnce runs every check of the suite against the agent f builds and
// reports the first violation through t (t.Errorf, from the calling
// goroutine): the check, the first violating seed, a one-clause reason
// naming the defect, the shrunk schedule and the command that replays it.
// What it could not exercise it logs with t.Logf and lists in the result.
// It stops at the first check that fails; run a check alone for its own
// verdict.
func ExactlyOnce(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	cfg := newConfig(opts)
	return runChecks(t, f, cfg, allDefs)
}

// runChecks runs defs in order until one fails, and reports through t.
func runChecks(t testing.TB, f Factory, cfg *config, defs []*checkDef) Result {
	t.Helper()
	if msg := cfg.envError(); msg != "" {
		t.Errorf("%s", msg)
		return Result{Reason: msg}
	}
	if len(cfg.fromEnv) > 0 {
		t.Logf("verify: from the environment: %s", strings.Join(cfg.fromEnv, " "))
	}
	total := Result{OK: true}
	var fail *failure
	sawEffects := false
	ran := withT(t, func(tt *testing.T) {
		r := &runner{cfg: cfg, f: f, tt: tt}
		for _, d := range defs {
			if cfg.only != nil && !cfg.only[d.name] {
				continue
			}
			if d.control && cfg.noControl {
				total.NotApplicable = append(total.NotApplicable, d.name+": "+d.noControl)
				continue
			}
			run := r.runSchedules(d, d.count(cfg.schedules))
			total.Schedules += run.schedules
			sawEffects = sawEffects || run.effects
			for _, n := range run.notes {
				total.NotApplicable = append(total.NotApplicable, d.name+": "+n)
			}
			if d.needsEffects != "" && !run.effects {
				total.NotApplicable = append(total.NotApplicable, d.name+": "+d.needsEffects)
			}
			if run.first != nil {
				fail = r.describe(d, run.first)
				return
			}
		}
	})
	if !ran {
		total.OK = false
		total.Reason = "no test could be started to run the schedules in; pass a *testing.T"
		t.Errorf("verify: %s", total.Reason)
		return total
	}
	if total.Schedules > 0 && !sawEffects {
		total.NotApplicable = append(total.NotApplicable, noEffectsNote)
	}
	for _, n := range total.NotApplicable {
		t.Logf("verify: not exercised: %s", n)
	}
	if fail == nil {
		return total
	}
	total.OK = false
	total.Check, total.FirstViolatingSeed, total.Reason = fail.check, fail.seed, fail.reason
	total.Witness = fail.witness
	total.Replay = replayLine(t.Name(), fail.check, fail.seed)
	t.Errorf("%s", fail.message(total.Replay))
	return total
}

// noEffectsNote is said when no schedule saw the agent call External: its
// side effects, if it has any, went where the verifier cannot see them.
const noEffectsNote = "side effects: the agent called External in no schedule, so none of its side effects was judged; " +
	"an effect made through the agent's own client (a payment, an email) is invisible to the verifier: " +
	"give the handler an interface of its own that External satisfies in tests (see ShellWith)"

// failure is a violation, shrunk.
type failure struct {
	check         string
	seed          int64
	index         int
	reason        string
	witness       []string
	shrunkFrom    int
	eventsInShort int
}

func (r *runner) describe(d *checkDef, bad *indexedOutcome) *failure {
	small, out := r.shrink(bad.trial, bad.out)
	f := &failure{check: d.name, seed: bad.seed, index: bad.i, reason: bad.out.v.reason + r.outageHint(bad.trial, bad.out.v),
		shrunkFrom: len(bad.trial.sched.Events), eventsInShort: len(small.sched.Events)}
	f.witness = append(f.witness, fmt.Sprintf("%d room(s)", small.sched.Rooms))
	if d := small.sched.StartAfter; d > 0 {
		f.witness = append(f.witness, fmt.Sprintf("the agent starts %s after the humans spoke (a backlog after an outage)", d))
	}
	for _, e := range small.sched.Events {
		f.witness = append(f.witness, e.String())
	}
	f.witness = append(f.witness, small.ext.String())
	if small.supersede > 0 {
		f.witness = append(f.witness, fmt.Sprintf("a newer connection of the agent opens after its first instance sent %d request(s) with its socket up", small.supersede))
	}
	if out.v != nil && out.v.reason != f.reason {
		f.witness = append(f.witness, "(the shrunk schedule shows it as: "+out.v.reason+")")
	}
	return f
}

// outageHint explains a violation that needs the outage before the
// agent's first life: the same schedule without it holds, so the agent
// judges messages by their age. Only the engine's verdicts on what Band
// shows are explained so: a rule of the verifier's names its own defect.
func (r *runner) outageHint(tr trial, v *verdict) string {
	if tr.sched.StartAfter == 0 || !strings.HasPrefix(v.kind, "oracle:") {
		return ""
	}
	d := tr.sched.StartAfter
	s := *tr.sched
	s.StartAfter = 0
	tr.sched = &s
	if r.simulate(tr).v != nil {
		return ""
	}
	return fmt.Sprintf("; the same schedule holds without the %s outage before the agent started, so its logic goes by a message's age: "+
		"serve every message Band hands out, however old, and dedupe by its key, never its age", d)
}

func (f *failure) message(replay string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "verify: %s: exactly-once violated at seed %d (schedule %d): %s\n", f.check, f.seed, f.index+1, f.reason)
	fmt.Fprintf(&b, "  minimal schedule (%d event(s), shrunk from %d):\n", f.eventsInShort, f.shrunkFrom)
	for _, w := range f.witness {
		fmt.Fprintf(&b, "    %s\n", w)
	}
	fmt.Fprintf(&b, "  replay: %s", replay)
	return b.String()
}

// replayLine is the command that runs the violating schedule alone. It
// names the test's package, so that it works from anywhere in the module.
func replayLine(testName, check string, seed int64) string {
	parts := strings.Split(testName, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return fmt.Sprintf("%s=%s %s=%d %s=1 go test -run '%s' %s", EnvCheck, check, EnvSeed, seed, EnvSchedules, strings.Join(parts, "/"), testPackage(parts[0][1:len(parts[0])-1]))
}

// testPackage names the package of the running test whose top-level
// function is top: its import path, read from the stack (the frame of
// that function, or else the first frame outside this package); for a
// package main, whose functions the stack names "main.", its directory
// relative to the module's root (go test runs a test binary in its
// package's directory); "." when neither can be found.
func testPackage(top string) string {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	self, outside := "", ""
	for {
		f, more := frames.Next()
		pkg, fn := splitFuncName(f.Function)
		if self == "" {
			self = pkg // this package's own
		}
		if pkg != "" && (fn == top || strings.HasPrefix(fn, top+".")) {
			outside = pkg
			break
		}
		if outside == "" && pkg != "" && pkg != self && pkg != "testing" && pkg != "runtime" {
			outside = pkg
		}
		if !more {
			break
		}
	}
	outside = strings.TrimSuffix(outside, "_test")
	if outside != "" && outside != "main" {
		return outside
	}
	return moduleRelativeDir()
}

// splitFuncName splits a stack frame's function, such as
// "example.com/pager_test.TestPager.func1", into its package path and
// the rest.
func splitFuncName(name string) (pkg, fn string) {
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return "", ""
	}
	return name[:slash+1+dot], name[slash+1+dot+1:]
}

// moduleRelativeDir is the working directory relative to the root of the
// module that holds it, as "./dir" ("." at the root, or when there is no
// go.mod above it).
func moduleRelativeDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

func runOne(t testing.TB, d *checkDef, f Factory, opts []Option) Result {
	t.Helper()
	cfg := newConfig(opts)
	cfg.only = nil // the caller chose the check
	return runChecks(t, f, cfg, []*checkDef{d})
}

// KillBeforePost kills the agent just before it sends a reply: the message
// is served again, and must still be answered exactly once.
func KillBeforePost(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defKillBeforePost, f, opts)
}

// KillAfterPost kills the agent after Band applied its reply, before the
// answer arrives: the redelivery must not post it again.
func KillAfterPost(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defKillAfterPost, f, opts)
}

// LostAck loses, fails or kills the processed mark after the reply: only
// the mark may be retried; the message is neither answered twice nor
// marked failed.
func LostAck(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defLostAck, f, opts)
}

// LostReply loses the answer to a reply POST Band applied, or fails it,
// while the agent lives: the reply must not be re-sent blind.
func LostReply(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defLostReply, f, opts)
}

// DuplicateDelivery serves messages again: stale /next answers, duplicated
// pushes, lost answers to /next and the processing mark.
func DuplicateDelivery(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defDuplicateDelivery, f, opts)
}

// TransientErrors answers requests 429 (with and without Retry-After) and
// 5xx, and slows them down.
func TransientErrors(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defTransientErrors, f, opts)
}

// HandlerErrors makes the external system fail the first calls of some
// effects, so handlers fail and messages come back: a failed message must
// neither stall its room nor be given up on.
func HandlerErrors(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defHandlerErrors, f, opts)
}

// NaturalKeys sends messages whose texts carry natural keys that contain
// one another (work:k1, work:k10): a guard must match its marker exactly.
func NaturalKeys(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defNaturalKeys, f, opts)
}

// LongRoom fills a room beyond one page of context, then kills the agent
// after a late reply: the guard must read every page.
func LongRoom(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defLongRoom, f, opts)
}

// Interrupt interrupts the agent while its handler works (and at request
// boundaries): nothing may be posted or performed for the cycle after the
// signal, and the message is consumed.
func Interrupt(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defInterrupt, f, opts)
}

// StopAndPlay stops a room while its handler works, then plays it (some
// plays are missed while the socket is down): no work starts while the room
// is stopped, and the stopped message is answered once after play.
func StopAndPlay(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defStopAndPlay, f, opts)
}

// Supersede opens a newer connection of the agent while it works: the
// superseded instance must stop and send nothing more, and a fresh instance
// carries on without losing or doubling anything.
func Supersede(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defSupersede, f, opts)
}

// Storm runs the prover's random schedules: several rooms, every fault and
// control signal mixed, and a flaky external system.
func Storm(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defStorm, f, opts)
}
