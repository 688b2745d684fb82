package procverify

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run of the verifier.
type Config struct {
	// Command is the agent: a program and its arguments. Required.
	Command []string
	// Seed is the master seed: schedule i of a check has seed Seed+i.
	Seed int64
	// Schedules is how many schedules each check runs. Zero means
	// DefaultSchedules.
	Schedules int
	// Checks limits the run to these checks (see Checks). Empty means
	// every check.
	Checks []string
	// NoSocket declares an agent without a socket: the checks that need
	// one are not run, and the receipt says so.
	NoSocket bool
	// MayNotReply declares an agent that may consume a message without
	// answering it.
	MayNotReply bool
	// SupersedeExitCode also requires a superseded process to exit
	// non-zero: band-once's convention, not Band's (its Python SDK stops
	// and exits 0). Without it, a superseded process must send nothing
	// more and exit within the grace, with any status.
	SupersedeExitCode bool
	// Parallel is how many schedules run at once. Zero means
	// min(GOMAXPROCS, 4).
	Parallel int
	// Grace is how long the agent has to exit after SIGTERM, and after it
	// was superseded. Zero means 15 s.
	Grace time.Duration
	// ConnectTimeout bounds the wait for the agent's first request. Zero
	// means 30 s.
	ConnectTimeout time.Duration
	// Quiet is how long the agent may make no progress (no claim, mark
	// or reply) before it is judged stalled (the quiet rule): an agent's
	// retry cadence must fit in it. Every failure the schedule injects
	// (an error answer, a lost answer, a kill) excuses one more Quiet, so
	// an agent that waits its cadence before each retry of a burst is not
	// stalled. Zero means DefaultQuiet.
	Quiet time.Duration
	// ShrinkBudget bounds the runs spent shrinking the first violation.
	// Zero means 48; below zero, the violation is not shrunk.
	ShrinkBudget int
	// ReplayFlags are the flags the replay commands repeat (capabilities,
	// grace), as typed.
	ReplayFlags string
	// Replicas, when 2 or more, runs that many copies of the agent at
	// once, as replicas of one agent: they share a PostgreSQL database of
	// the schedule's own, named in BANDONCE_LEDGER, and are expected to
	// elect one holder among them. Kills, pauses and hand-overs aim at
	// the holder, a dead or departed replica is replaced by a new one,
	// and a request from a replica after another took over is a
	// violation (Fenced). 0 or 1 runs one process at a time.
	Replicas int
	// Postgres is the URL (postgres://) of a PostgreSQL server on which
	// each schedule creates a database of its own and drops it after.
	// Required with Replicas.
	Postgres string
	// LeaseTime is the lease the replicas are told (BANDONCE_LEASE_TIME)
	// unless the environment sets it. Zero means DefaultLeaseTime.
	LeaseTime time.Duration
	// Trace, if set, gets one line per step of every schedule; Output,
	// if set, every line the agent writes, prefixed with its life.
	Trace, Output func(line string)
	// Progress, if set, is called after each schedule with schedules done
	// and the total.
	Progress func(done, total int)
}

// DefaultSchedules is how many schedules a check runs by default.
const DefaultSchedules = 3

// DefaultQuiet is Config.Quiet's default: above the 60 s retry cadence
// common in Band's SDKs, with room for their jitter.
const DefaultQuiet = 90 * time.Second

type settings struct {
	Config
	// runs numbers every schedule run (shrinking trials too), so that
	// each gets a fake Band whose ids no other run shares.
	runs atomic.Int64
}

func (c Config) withDefaults() (*settings, error) {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return nil, errors.New("procverify: no agent command")
	}
	s := &settings{Config: c}
	if s.Schedules <= 0 {
		s.Schedules = DefaultSchedules
	}
	if s.Parallel <= 0 {
		s.Parallel = min(runtime.GOMAXPROCS(0), 4)
	}
	if s.Grace <= 0 {
		s.Grace = 15 * time.Second
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = 30 * time.Second
	}
	if s.Quiet <= 0 {
		s.Quiet = DefaultQuiet
	}
	switch {
	case s.ShrinkBudget == 0:
		s.ShrinkBudget = 48
	case s.ShrinkBudget < 0:
		s.ShrinkBudget = 0
	}
	for _, name := range s.Checks {
		c, ok := CheckNamed(name)
		if !ok {
			return nil, fmt.Errorf("procverify: unknown check %q (want one of %s)", name, strings.Join(checkNames(), ", "))
		}
		if c.Replicas && s.Replicas < 2 {
			return nil, fmt.Errorf("procverify: check %q acts on a holder among replicas: it needs Replicas of 2 or more", name)
		}
	}
	if s.Replicas >= 2 {
		if s.Postgres == "" {
			return nil, ErrNoPostgres
		}
		if !strings.HasPrefix(s.Postgres, "postgres://") && !strings.HasPrefix(s.Postgres, "postgresql://") {
			return nil, errors.New("procverify: Postgres must be a postgres:// URL")
		}
		if s.LeaseTime <= 0 {
			s.LeaseTime = DefaultLeaseTime
		}
	}
	return s, nil
}

func checkNames() []string {
	out := make([]string, len(Checks))
	for i, c := range Checks {
		out[i] = c.Name
	}
	return out
}

// Why a run could not reach a verdict.
var (
	// ErrCommandMissing: the agent's program was not found.
	ErrCommandMissing = errors.New("the agent's command was not found")
	// ErrNeverConnected: the agent never sent a request to the fake Band.
	ErrNeverConnected = errors.New("the agent never connected")
	// ErrInterrupted: the run was cancelled before its verdict.
	ErrInterrupted = errors.New("interrupted before a verdict")
)

// RunError says why a run could not reach a verdict; errors.Is matches its
// Kind (ErrCommandMissing, ErrNeverConnected, ErrInterrupted).
type RunError struct {
	Kind   error
	Detail string
	// Output is the last lines the agent wrote, if it ran.
	Output []string
}

func (e *RunError) Error() string {
	if e.Detail == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Detail
}

func (e *RunError) Unwrap() error { return e.Kind }

// Run verifies the agent: a preflight that waits for it to connect, then
// every schedule of every selected check, then a shrink of the first
// violation. The error is a *RunError when no verdict could be reached.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(s.Command[0]); err != nil {
		return nil, &RunError{Kind: ErrCommandMissing, Detail: err.Error()}
	}
	if err := preflight(ctx, s); err != nil {
		return nil, err
	}
	rep := newReport(s)
	scheds, notes := s.schedules()
	rep.NotExercised = append(rep.NotExercised, notes...)
	results := runAll(ctx, s, scheds, s.Progress)
	if ctx.Err() != nil {
		return nil, &RunError{Kind: ErrInterrupted}
	}
	for _, r := range results {
		if r.Err != nil {
			return nil, &RunError{Kind: ErrNeverConnected, Detail: fmt.Sprintf("schedule %s seed %d: %v", r.Schedule.Check, r.Schedule.Seed, r.Err)}
		}
	}
	rep.add(s, results)
	if first := firstViolation(results); first != nil {
		f, err := describe(ctx, s, first)
		if err != nil {
			return nil, err
		}
		rep.First = f
	}
	rep.finish(time.Since(start))
	return rep, nil
}

// RunSchedules runs hand-made schedules, after the preflight, and returns
// their results in order. Violations are not shrunk.
func RunSchedules(ctx context.Context, cfg Config, scheds []*Schedule) ([]Result, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := preflight(ctx, s); err != nil {
		return nil, err
	}
	results := runAll(ctx, s, scheds, s.Progress)
	if ctx.Err() != nil {
		return nil, &RunError{Kind: ErrInterrupted}
	}
	return results, nil
}

// schedules draws every schedule of the run, and says which checks it
// left out.
func (s *settings) schedules() ([]*Schedule, []string) {
	var out []*Schedule
	var notes []string
	for _, c := range Checks {
		if len(s.Checks) > 0 && !slices.Contains(s.Checks, c.Name) {
			continue
		}
		if c.Replicas && s.Replicas < 2 {
			continue // it needs replicas: see Config.Replicas
		}
		if c.Socket && s.NoSocket {
			notes = append(notes, c.Name+": the agent was declared without a socket (-no-socket), so no signal or socket fault can reach it")
			continue
		}
		for i := range s.Schedules {
			out = append(out, c.buildFor(s.Seed+int64(i), !s.NoSocket, s.Replicas >= 2))
		}
	}
	return out, notes
}

// preflight starts the agent once against an empty Band and waits for
// its first request, so that a command that cannot run is told apart from
// an agent that breaks a rule.
func preflight(ctx context.Context, s *settings) error {
	sm, err := newSim(ctx, s, &Schedule{Check: "preflight", Rooms: 1})
	if err != nil {
		return err
	}
	defer sm.close()
	sm.start = time.Now()
	if err := sm.startLife(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return &RunError{Kind: ErrCommandMissing, Detail: err.Error()}
		}
		return &RunError{Kind: ErrNeverConnected, Detail: "it could not be started: " + err.Error()}
	}
	l := sm.current()
	defer sm.endLife(l, endKilled)
	deadline := time.NewTimer(s.ConnectTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		l.mu.Lock()
		connected := l.connected
		l.mu.Unlock()
		switch {
		case connected:
			return nil
		case l.proc.Exited():
			return &RunError{Kind: ErrNeverConnected, Detail: fmt.Sprintf("it ended (%s) before its first request to BAND_BASE_URL", l.proc.ExitString()), Output: l.out.Lines()}
		}
		select {
		case <-ctx.Done():
			return &RunError{Kind: ErrInterrupted}
		case <-deadline.C:
			return &RunError{Kind: ErrNeverConnected, Detail: fmt.Sprintf("no request reached BAND_BASE_URL within %s", s.ConnectTimeout), Output: l.out.Lines()}
		case <-poll.C:
		}
	}
}

// runOne runs one schedule to its verdict.
func runOne(ctx context.Context, s *settings, sched *Schedule) Result {
	sm, err := newSim(ctx, s, sched)
	if err != nil {
		return Result{Schedule: sched, Err: err}
	}
	return sm.run()
}

// runAll runs the schedules on s.Parallel workers, in order of index.
func runAll(ctx context.Context, s *settings, scheds []*Schedule, progress func(done, total int)) []Result {
	results := make([]Result, len(scheds))
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range min(s.Parallel, max(len(scheds), 1)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(scheds) {
					return
				}
				results[i] = runOne(ctx, s, scheds[i])
				if d := done.Add(1); progress != nil {
					progress(int(d), len(scheds))
				}
			}
		})
	}
	wg.Wait()
	return results
}

func firstViolation(results []Result) *Result {
	for i := range results {
		if results[i].Violation != nil {
			return &results[i]
		}
	}
	return nil
}

// describe shrinks the first violation into a witness.
func describe(ctx context.Context, s *settings, bad *Result) (*Failure, error) {
	small, res, trials := shrink(ctx, s, bad.Schedule, *bad)
	if ctx.Err() != nil {
		return nil, &RunError{Kind: ErrInterrupted}
	}
	v := res.Violation
	f := &Failure{
		Check: bad.Schedule.Check, Seed: bad.Schedule.Seed, Invariant: v.Invariant, Reason: v.Reason,
		WitnessOf: len(bad.Schedule.Events), ShrinkRuns: trials,
		Setting: fmt.Sprintf("%d room(s)", small.Rooms),
		Replay:  s.replay(bad.Schedule.Check, bad.Schedule.Seed, 1),
		Output:  res.Output,
	}
	for _, e := range small.Events {
		f.Witness = append(f.Witness, e.String())
	}
	return f, nil
}

// replay is the command line that reruns a check (every check if check
// is "") from seed.
func (s *settings) replay(check string, seed int64, schedules int) string {
	cmd := fmt.Sprintf("bandonce verify -seed %d -schedules %d", seed, schedules)
	if check != "" {
		cmd += " -check " + check
	} else if len(s.Checks) > 0 {
		cmd += " -check " + strings.Join(s.Checks, ",")
	}
	if s.ReplayFlags != "" {
		cmd += " " + s.ReplayFlags
	}
	return cmd + " -- " + ShellQuote(s.Command)
}

// ShellQuote joins args into one line a POSIX shell reads back as args.
func ShellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' ||
				r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
