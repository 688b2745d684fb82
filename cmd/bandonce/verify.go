package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/internal/procgroup"
	"github.com/band-once/bandonce/internal/procverify"
)

// defaultVerifySeed seeds the schedules when -seed is not given.
const defaultVerifySeed = 1

type verifyOptions struct {
	cfg     procverify.Config
	json    bool
	verbose bool
}

// maxReplicas bounds -replicas: every replica is a process per schedule.
const maxReplicas = 5

func parseVerify(args []string, stderr io.Writer) (verifyOptions, error) {
	var o verifyOptions
	fs := flag.NewFlagSet("bandonce verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: bandonce verify [flags] -- <command> [args...]\n\nchecks:\n")
		for _, c := range procverify.Checks {
			fmt.Fprintf(stderr, "  %-19s %s\n", c.Name, c.Doc)
		}
		fmt.Fprintf(stderr, "\nflags:\n")
		fs.PrintDefaults()
	}
	fs.Int64Var(&o.cfg.Seed, "seed", defaultVerifySeed, "master `seed`: schedule i of a check uses seed+i")
	fs.IntVar(&o.cfg.Schedules, "schedules", procverify.DefaultSchedules, "schedules per check")
	checks := fs.String("check", "", "run only these checks, comma-separated (default: every check)")
	fs.BoolVar(&o.cfg.NoSocket, "no-socket", false, "the agent has no socket: skip the checks that need one (control signals, socket faults, supersede)")
	fs.BoolVar(&o.cfg.MayNotReply, "may-not-reply", false, "the agent may consume a message without answering it")
	fs.BoolVar(&o.cfg.SupersedeExitCode, "supersede-exit", false, "also require a superseded process to exit non-zero (band-once's convention, not Band's)")
	fs.IntVar(&o.cfg.Parallel, "parallel", 0, "schedules run at once (default min(GOMAXPROCS, 4))")
	fs.DurationVar(&o.cfg.Grace, "grace", 15*time.Second, "how long the agent has to exit after SIGTERM or a supersede")
	fs.DurationVar(&o.cfg.ConnectTimeout, "connect-timeout", 30*time.Second, "how long to wait for the agent's first request")
	fs.DurationVar(&o.cfg.Quiet, "quiet", procverify.DefaultQuiet, "how long the agent may make no progress before it is stalled (above its retry cadence; each failure injected adds as much again)")
	fs.IntVar(&o.cfg.ShrinkBudget, "shrink", 48, "runs spent shrinking the first violation to a minimal witness")
	fs.IntVar(&o.cfg.Replicas, "replicas", 0, "run `N` copies of the agent at once as replicas sharing a PostgreSQL ledger (BANDONCE_LEDGER), and fail the holder over: kills, pauses past its lease, hand-overs (0: one process at a time)")
	fs.StringVar(&o.cfg.Postgres, "postgres", "", "with -replicas: a PostgreSQL server `URL` on which each schedule creates and drops a database (default $"+postgresEnv+", else a throwaway server started on loopback)")
	fs.DurationVar(&o.cfg.LeaseTime, "lease", procverify.DefaultLeaseTime, "with -replicas: the lease the replicas are told (BANDONCE_LEASE_TIME), unless the environment sets it")
	fs.BoolVar(&o.json, "json", false, "print the receipt as JSON")
	fs.BoolVar(&o.verbose, "v", false, "trace every schedule and show the agent's output on stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.cfg.Command = fs.Args()
	if len(o.cfg.Command) == 0 {
		return o, errors.New("no agent command: put it after --, e.g. bandonce verify -- python3 agent.py")
	}
	if o.cfg.Schedules < 1 {
		return o, errors.New("-schedules must be at least 1")
	}
	for name, d := range map[string]time.Duration{"-grace": o.cfg.Grace, "-connect-timeout": o.cfg.ConnectTimeout, "-quiet": o.cfg.Quiet} {
		if d <= 0 {
			return o, fmt.Errorf("%s must be positive, not %v", name, d)
		}
	}
	switch {
	case o.cfg.Parallel < 0:
		return o, errors.New("-parallel must be at least 1, or 0 for the default")
	case o.cfg.ShrinkBudget < 0:
		return o, errors.New("-shrink must be 0 (do not shrink) or more")
	case o.cfg.ShrinkBudget == 0:
		o.cfg.ShrinkBudget = -1 // procverify's "do not shrink"
	}
	switch r := o.cfg.Replicas; {
	case r == 1 || r < 0 || r > maxReplicas:
		return o, fmt.Errorf("-replicas must be 0 (one process at a time) or from 2 to %d", maxReplicas)
	case r == 0 && o.cfg.Postgres != "":
		return o, errors.New("-postgres is for -replicas: one process at a time needs no database")
	case o.cfg.Postgres != "" && !strings.HasPrefix(o.cfg.Postgres, "postgres://") && !strings.HasPrefix(o.cfg.Postgres, "postgresql://"):
		return o, errors.New("-postgres must be a postgres:// URL, as BANDONCE_LEDGER takes it")
	}
	if o.cfg.LeaseTime < 300*time.Millisecond {
		return o, errors.New("-lease must be at least 300ms, as pgledger's is")
	}
	if *checks != "" {
		for _, c := range strings.Split(*checks, ",") {
			c = strings.TrimSpace(c)
			check, ok := procverify.CheckNamed(c)
			if !ok {
				return o, fmt.Errorf("-check: unknown check %q", c)
			}
			if check.Replicas && o.cfg.Replicas < 2 {
				return o, fmt.Errorf("-check %s acts on the holder among replicas: add -replicas 2", c)
			}
			o.cfg.Checks = append(o.cfg.Checks, c)
		}
	}
	// The replay commands repeat the flags that change what is judged.
	var replay []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "no-socket", "may-not-reply", "supersede-exit":
			replay = append(replay, "-"+f.Name)
		case "grace", "connect-timeout", "quiet", "replicas", "lease":
			replay = append(replay, "-"+f.Name+" "+f.Value.String())
		}
	})
	o.cfg.ReplayFlags = strings.Join(replay, " ")
	return o, nil
}

func verifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseVerify(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "bandonce verify:", err)
		return exitCannot
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stderr, line)
	}
	if o.cfg.Replicas >= 2 {
		// Before the subreaper below: a throwaway server's daemon must
		// not be taken for an orphan of the agent's and killed.
		stop, err := findPostgres(ctx, &o, say)
		if err != nil {
			fmt.Fprintln(stderr, "bandonce verify:", err)
			return exitCannot
		}
		defer stop()
	}
	// Orphans of the agent's killed processes come here to be killed and
	// reaped, so none outlives the run.
	_ = procgroup.BecomeSubreaper()
	defer procgroup.ReapOrphans()

	if o.verbose {
		o.cfg.Trace, o.cfg.Output = say, say
	}
	if !o.json {
		o.cfg.Progress = func(done, total int) {
			if done == total || done%10 == 0 {
				say(fmt.Sprintf("bandonce verify: %d of %d schedules", done, total))
			}
		}
	}
	rep, err := procverify.Run(ctx, o.cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce verify: could not run:", err)
		var re *procverify.RunError
		if errors.As(err, &re) {
			for _, line := range re.Output {
				fmt.Fprintln(stderr, "  | "+line)
			}
			if errors.Is(err, procverify.ErrInterrupted) {
				fmt.Fprintln(stderr, "bandonce verify: the agent's processes were killed; no verdict")
			}
		}
		return exitCannot
	}
	if o.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bandonce verify:", err)
		return exitCannot
	}
	if !rep.Held {
		return exitViolated
	}
	return exitOK
}

// findPostgres gives -replicas its PostgreSQL server: -postgres, else
// $BANDONCE_TEST_POSTGRES, else a throwaway server of its own, removed by
// the stop it returns.
func findPostgres(ctx context.Context, o *verifyOptions, say func(string)) (stop func(), err error) {
	if o.cfg.Postgres == "" {
		o.cfg.Postgres = os.Getenv(postgresEnv)
	}
	if o.cfg.Postgres != "" {
		return func() {}, nil
	}
	tw, err := startThrowaway(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	if !o.json {
		say("bandonce verify: started a throwaway PostgreSQL for the replicas (" + strings.TrimPrefix(tw.url, "postgres://") + "); it is removed at the end")
	}
	o.cfg.Postgres = tw.url
	return tw.stop, nil
}
