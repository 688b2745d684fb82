// Command proof runs the kill-storm prover and prints its receipt: the
// real bandonce.Shell, driven through the real HTTP stack against the fake
// Band, under seeded schedules of crashes, HTTP faults, socket faults and
// control signals, judged from the fake's ground truth.
//
//	go run ./cmd/proof                      # 10,000 random schedules
//	go run ./cmd/proof -exhaustive          # every single and double kill point
//	go run ./cmd/proof -seed 42 -schedules 1 -v
//
// It exits 0 only when every invariant held in every schedule.
//
// Each schedule runs in a testing/synctest bubble, which needs a
// *testing.T, so the command runs the prover as the single test of
// testing.Main, with the testing framework's own output sent to
// /dev/null.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/band-once/bandonce/proof"
)

// defaultSeed is band-once 0.1's master seed, kept so receipts compare.
const defaultSeed = 20260616

type options struct {
	seed       int64
	schedules  int
	exhaustive bool
	json       bool
	verbose    bool
	ledger     string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("proof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&o.seed, "seed", defaultSeed, "master seed; random schedule i uses seed+i")
	fs.IntVar(&o.schedules, "schedules", 10000, "random schedules to run")
	fs.BoolVar(&o.exhaustive, "exhaustive", false, "enumerate every single and double kill point (1 room, 1–3 messages) instead of random schedules")
	fs.BoolVar(&o.json, "json", false, "print the receipt as JSON")
	fs.BoolVar(&o.verbose, "v", false, "print one line per schedule before the receipt")
	fs.StringVar(&o.ledger, "ledger", string(proof.LedgerMemory), "ledger durable schedules keep across kills: memory or bolt")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.ledger != string(proof.LedgerMemory) && o.ledger != string(proof.LedgerBolt) {
		return o, fmt.Errorf("-ledger must be memory or bolt, not %q", o.ledger)
	}
	if o.schedules < 1 && !o.exhaustive {
		return o, fmt.Errorf("-schedules must be at least 1")
	}
	return o, nil
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
			if !prove(t, o, receipt, os.Stderr) {
				t.Fail()
			}
		},
	}}, nil, nil)
}

// prove runs the prover and writes its receipt; it reports whether
// exactly-once held.
func prove(t *testing.T, o options, out io.Writer, stderr *os.File) bool {
	cfg := proof.RunConfig{
		Seed:       o.seed,
		Schedules:  o.schedules,
		Exhaustive: o.exhaustive,
		Verbose:    o.verbose,
		Ledger:     ledgerDescription(proof.LedgerKind(o.ledger)),
	}
	if wd, err := os.Getwd(); err == nil {
		cfg.Revision = gitRevision(wd)
	}
	shell := proof.ShellConfig{Durable: proof.LedgerKind(o.ledger)}
	if shell.Durable == proof.LedgerBolt {
		cfg.ReplayFlags = "-ledger bolt"
		dir, err := os.MkdirTemp("", "bandonce-proof-")
		if err != nil {
			fmt.Fprintln(stderr, "proof:", err)
			return false
		}
		defer os.RemoveAll(dir)
		shell.Dir = dir
	}
	cfg.Engine.Agent = proof.ShellAgent(shell)
	if isTerminal(stderr) {
		cfg.Progress = progressLine(stderr)
		defer fmt.Fprint(stderr, "\r\033[K")
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

func ledgerDescription(k proof.LedgerKind) string {
	kept := "one MemoryLedger across kills, reported durable (a kill loses no write that returned)"
	if k == proof.LedgerBolt {
		kept = "one boltledger file across kills, reopened by every life"
	}
	return fmt.Sprintf("%s: a fresh MemoryLedger every life; a durable schedule keeps %s", k, kept)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine returns a Progress func that redraws one stderr line at
// most every 200 ms.
func progressLine(w io.Writer) func(done, total int) {
	var mu sync.Mutex
	var last time.Time
	return func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		if total > 0 {
			fmt.Fprintf(w, "\rproof: %d/%d schedules", done, total)
		} else {
			fmt.Fprintf(w, "\rproof: %d schedules", done)
		}
	}
}
