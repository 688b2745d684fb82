// Command proof runs the kill-storm prover and prints its receipt: the
// real bandonce.Shell, driven through the real HTTP stack against the fake
// Band, under seeded schedules of crashes, HTTP faults, socket faults and
// control signals, judged from the fake's ground truth.
//
//	go run ./cmd/proof                      # 10,000 random schedules
//	go run ./cmd/proof -exhaustive          # every single and double kill point
//	go run ./cmd/proof -seed 42 -schedules 1 -v
//	go run ./cmd/proof -seed 1,777 -schedules 100000   # two master seeds
//	go run ./cmd/proof -seed random -schedules 20000   # a seed drawn fresh
//	go run ./cmd/proof -seeds 4                         # the default seed and 3 fresh ones
//
// It exits 0 only when every invariant held in every schedule.
//
// Each schedule runs in a testing/synctest bubble, which needs a
// *testing.T, so the command runs the prover as the single test of
// testing.Main, with the testing framework's own output sent to
// /dev/null.
package main

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/band-once/bandonce/proof"
)

// defaultSeed is band-once 0.1's master seed, kept so receipts compare.
const defaultSeed = 20260616

// postgresEnv is where -postgres comes from by default: the test
// database .ci/run starts.
const postgresEnv = "BANDONCE_TEST_POSTGRES"

type options struct {
	seeds      []int64 // master seeds; the first is the one -exhaustive uses
	fresh      int     // how many of seeds were drawn fresh
	schedules  int
	exhaustive bool
	json       bool
	verbose    bool
	ledger     string
	postgres   string // the database of -ledger pg
	replicas   int    // replicas per schedule; 0 runs one agent
	cpuprofile string // where to write a CPU profile of the run; "" writes none
	memprofile string // where to write an allocation profile of the run; "" writes none
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("proof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seedList := fs.String("seed", fmt.Sprint(defaultSeed), "master seeds, comma-separated; random schedule i of seed S uses S+i; \"random\" draws one fresh")
	count := fs.Int("seeds", 0, "run this many master seeds: those of -seed, then fresh ones")
	fs.IntVar(&o.schedules, "schedules", 10000, "random schedules to run per master seed")
	fs.BoolVar(&o.exhaustive, "exhaustive", false, "enumerate every single and double kill point (1 room, 1–3 messages) instead of random schedules")
	fs.BoolVar(&o.json, "json", false, "print the receipt as JSON")
	fs.BoolVar(&o.verbose, "v", false, "print one line per schedule before the receipt")
	fs.StringVar(&o.ledger, "ledger", string(ledgerMemory), "ledger durable schedules keep across kills: memory, bolt or pg")
	fs.IntVar(&o.replicas, "replicas", 0, "run every schedule with this many replicas of the shell on one leased ledger (2 or more; 0 runs one shell)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile of the run to this file (for go tool pprof -sample_index=alloc_space)")
	fs.StringVar(&o.postgres, "postgres", os.Getenv(postgresEnv), "PostgreSQL URL for -ledger pg (default $"+postgresEnv+"); the run works in a schema of its own and drops it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch ledgerKind(o.ledger) {
	case ledgerMemory, ledgerBolt:
	case ledgerPG:
		if o.postgres == "" {
			return o, fmt.Errorf("-ledger pg needs a database: -postgres URL, or %s in the environment", postgresEnv)
		}
	default:
		return o, fmt.Errorf("-ledger must be memory, bolt or pg, not %q", o.ledger)
	}
	switch {
	case o.replicas < 0 || o.replicas == 1:
		return o, fmt.Errorf("-replicas must be 2 or more (or 0 for one shell)")
	case o.replicas > 0 && ledgerKind(o.ledger) == ledgerBolt:
		return o, fmt.Errorf("-replicas needs a ledger replicas can share: memory (the lease model) or pg, not bolt (one process's file)")
	case o.replicas > 0 && o.exhaustive:
		return o, fmt.Errorf("-replicas runs random schedules, not -exhaustive")
	}
	if o.schedules < 1 && !o.exhaustive {
		return o, fmt.Errorf("-schedules must be at least 1")
	}
	for _, f := range strings.Split(*seedList, ",") {
		f = strings.TrimSpace(f)
		if f == "random" {
			o.seeds, o.fresh = append(o.seeds, freshSeed()), o.fresh+1
			continue
		}
		s, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return o, fmt.Errorf("-seed wants integers or \"random\", not %q", f)
		}
		o.seeds = append(o.seeds, s)
	}
	if *count < 0 {
		return o, fmt.Errorf("-seeds must not be negative")
	}
	for len(o.seeds) < *count {
		o.seeds, o.fresh = append(o.seeds, freshSeed()), o.fresh+1
	}
	if o.exhaustive && len(o.seeds) > 1 {
		return o, fmt.Errorf("-exhaustive runs one master seed")
	}
	return o, nil
}

// freshSeed draws a master seed no one chose, so a run can find what a
// fixed seed never shows.
func freshSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:])%(1<<31)) + 1 // short enough to read out of a log
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(os.Stderr, "proof:", err)
		}
		os.Exit(2)
	}
	receipt := os.Stdout
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proof:", err)
		os.Exit(2)
	}
	os.Stdout = devNull // the testing framework's PASS/FAIL lines
	os.Args = os.Args[:1]
	// Schedules allocate briskly and keep little; a lazier collector buys
	// throughput for a few tens of megabytes.
	debug.SetGCPercent(800)

	matchAll := func(string, string) (bool, error) { return true, nil }
	testing.Main(matchAll, []testing.InternalTest{{
		Name: "KillStorm",
		F: func(t *testing.T) {
			if o.cpuprofile != "" {
				stop, err := startCPUProfile(o.cpuprofile)
				if err != nil {
					fmt.Fprintln(os.Stderr, "proof:", err)
					t.FailNow()
				}
				defer stop()
			}
			if o.memprofile != "" {
				defer func() {
					if err := writeAllocProfile(o.memprofile); err != nil {
						fmt.Fprintln(os.Stderr, "proof:", err)
						t.Fail()
					}
				}()
			}
			if !prove(t, o, receipt, os.Stderr) {
				t.Fail()
			}
		},
	}}, nil, nil)
}

// prove runs the prover and writes its receipt; it reports whether
// exactly-once held.
func prove(t *testing.T, o options, out io.Writer, stderr *os.File) bool {
	if o.fresh > 0 {
		// Before the run, so a crash or a timeout still says how to replay.
		fmt.Fprintf(stderr, "proof: master seeds %s (%d drawn fresh); replay with -seed %s\n", seedList(o.seeds, ", "), o.fresh, seedList(o.seeds, ","))
	}
	cfg := proof.RunConfig{
		Seed:       o.seeds[0],
		Seeds:      o.seeds,
		Schedules:  o.schedules,
		Exhaustive: o.exhaustive,
		Verbose:    o.verbose,
		Ledger:     ledgerDescription(ledgerKind(o.ledger), o.replicas),
		Gen:        proof.GenOptions{Replicas: o.replicas, NoSkew: o.replicas > 0 && ledgerKind(o.ledger) == ledgerPG},
	}
	if o.replicas > 0 && ledgerKind(o.ledger) == ledgerPG {
		// Its time goes to PostgreSQL's answers and flushes, not the
		// CPU: more schedules at once.
		cfg.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if wd, err := os.Getwd(); err == nil {
		cfg.Revision = gitRevision(wd)
	}
	shell := durableConfig{kind: ledgerKind(o.ledger)}
	if o.replicas > 0 {
		cfg.ReplayFlags = fmt.Sprintf("-replicas %d", o.replicas)
	}
	if shell.kind == ledgerBolt {
		cfg.ReplayFlags = "-ledger bolt"
		dir, err := os.MkdirTemp("", "bandonce-proof-")
		if err != nil {
			fmt.Fprintln(stderr, "proof:", err)
			return false
		}
		defer os.RemoveAll(dir)
		shell.dir = dir
	}
	if shell.kind == ledgerPG {
		cfg.ReplayFlags = strings.TrimSpace("-ledger pg " + cfg.ReplayFlags)
		drop, err := pgSchema(&shell, o.postgres)
		if err != nil {
			fmt.Fprintln(stderr, "proof:", err)
			return false
		}
		defer drop()
	}
	cfg.Engine.Agent = durableAgent(shell)
	cfg.Engine.DeadLettersTold = true // the Shell tells the room of every dead letter
	cfg.Engine.HandlersCut = true     // and cancels a handler a signal reached
	switch {
	case isTerminal(stderr):
		cfg.Progress = progressLine(stderr, "\r", 200*time.Millisecond)
		defer fmt.Fprint(stderr, "\r\033[K")
	case o.verbose:
		cfg.Progress = progressLine(stderr, "", time.Second)
	}
	rep := proof.Run(t, cfg)
	if o.verbose {
		for _, l := range rep.Lines {
			fmt.Fprintln(out, l)
		}
	}
	var err error
	if o.json {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "proof:", err)
		return false
	}
	return rep.Held
}

func ledgerDescription(k ledgerKind, replicas int) string {
	if replicas > 0 {
		switch k {
		case ledgerPG:
			return fmt.Sprintf("pg: every schedule's %d replicas share one pgledger in PostgreSQL (pgledger's RunLeader, lease and fencing; the database's now() is the schedule's virtual time)", replicas)
		default:
			return fmt.Sprintf("memory: every schedule's %d replicas share one leasemodel database (pgledger's lease and fencing SQL, in memory, held to it by internal/leasetest) and run pgledger's own leader loop on it", replicas)
		}
	}
	kept := "one MemoryLedger across kills, reported durable (a kill loses no write that returned)"
	switch k {
	case ledgerBolt:
		kept = "one boltledger file across kills, reopened by every life"
	case ledgerPG:
		kept = "one pgledger in PostgreSQL across kills, opened by every life, which leads under a new lease epoch"
	}
	return fmt.Sprintf("%s: a fresh MemoryLedger every life; a durable schedule keeps %s", k, kept)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine returns a Progress func that writes a progress line at
// most every interval: redrawn in place on a terminal (prefix "\r"),
// one line each otherwise.
func progressLine(w io.Writer, prefix string, every time.Duration) func(done, total int) {
	var mu sync.Mutex
	var last time.Time
	suffix := "\n"
	if prefix == "\r" {
		suffix = ""
	}
	return func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < every {
			return
		}
		last = time.Now()
		if total > 0 {
			fmt.Fprintf(w, "%sproof: %d/%d schedules%s", prefix, done, total, suffix)
		} else {
			fmt.Fprintf(w, "%sproof: %d schedules%s", prefix, done, suffix)
		}
	}
}

func seedList(seeds []int64, sep string) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, sep)
}
