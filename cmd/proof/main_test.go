package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/proof"
)

// TestMain doubles as the command: with PROOF_MAIN set, the test binary
// runs main with PROOF_ARGS, so the tests can check the real exit code and
// output streams.
func TestMain(m *testing.M) {
	if os.Getenv("PROOF_MAIN") == "1" {
		os.Args = append([]string{"proof"}, strings.Fields(os.Getenv("PROOF_ARGS"))...)
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

func runCommand(t *testing.T, args string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PROOF_MAIN=1", "PROOF_ARGS="+args)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	dsn := os.Getenv(postgresEnv)
	assert.Equal(t, options{seeds: []int64{defaultSeed}, schedules: 10000, ledger: "memory", postgres: dsn}, o)

	o, err = parseFlags([]string{"-seed", "7", "-schedules", "3", "-json", "-v", "-ledger", "bolt", "-exhaustive"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{seeds: []int64{7}, schedules: 3, exhaustive: true, json: true, verbose: true, ledger: "bolt", postgres: dsn}, o)

	o, err = parseFlags([]string{"-ledger", "pg", "-postgres", "postgres://db.example/x"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "postgres://db.example/x", o.postgres)
	_, err = parseFlags([]string{"-ledger", "pg", "-postgres", ""}, io.Discard)
	assert.ErrorContains(t, err, "-ledger pg needs a database")

	o, err = parseFlags([]string{"-seed", "1, 777,20260616"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 777, 20260616}, o.seeds)
	assert.Zero(t, o.fresh)

	o, err = parseFlags([]string{"-seed", "5,random", "-seeds", "4"}, io.Discard)
	require.NoError(t, err)
	require.Len(t, o.seeds, 4)
	assert.Equal(t, int64(5), o.seeds[0])
	assert.Equal(t, 3, o.fresh)
	for _, s := range o.seeds[1:] {
		assert.Positive(t, s, "fresh seeds are positive and short")
		assert.Less(t, s, int64(1)<<32)
	}
	assert.NotEqual(t, o.seeds[1], o.seeds[2], "drawn fresh, not fixed")

	for _, bad := range [][]string{{"-ledger", "sqlite"}, {"-schedules", "0"}, {"extra"}, {"-nope"},
		{"-seed", "x"}, {"-seed", "1,,2"}, {"-seeds", "-1"}, {"-exhaustive", "-seed", "1,2"}} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%v", bad)
	}
	_, err = parseFlags([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

func TestTheCommandPrintsOnlyTheReceiptAndExitsZeroWhenItHeld(t *testing.T) {
	stdout, stderr, code := runCommand(t, "-schedules 8")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr, "nothing on stderr when it is not a terminal")
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	require.NotEmpty(t, lines)
	assert.Equal(t, "band-once kill-storm prover: receipt", lines[0], "the testing framework's own lines are hidden")
	assert.Equal(t, "exactly-once held across 8 schedules: 0 double-posts, 0 lost messages", lines[len(lines)-1])
	assert.Contains(t, stdout, "replay               go run ./cmd/proof -seed 20260616 -schedules 8")
	assert.NotContains(t, stdout, "PASS")
}

func TestBadFlagsExitTwo(t *testing.T) {
	stdout, stderr, code := runCommand(t, "-ledger sqlite")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "-ledger must be memory, bolt or pg")
}

func TestTheReceiptAsJSON(t *testing.T) {
	var out bytes.Buffer
	held := prove(t, options{seeds: []int64{11}, schedules: 6, json: true, ledger: "memory"}, &out, os.Stderr)
	assert.True(t, held)
	var rep struct {
		MasterSeed int64          `json:"master_seed"`
		Schedules  int            `json:"schedules"`
		Held       bool           `json:"held"`
		Requests   int            `json:"http_requests"`
		Faults     map[string]int `json:"faults_triggered"`
		Invariants []struct {
			Name    string `json:"name"`
			Checked int    `json:"checked"`
		} `json:"invariants"`
		Replay string `json:"replay"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, int64(11), rep.MasterSeed)
	assert.Equal(t, 6, rep.Schedules)
	assert.True(t, rep.Held)
	assert.Positive(t, rep.Requests)
	assert.NotEmpty(t, rep.Invariants)
	assert.Equal(t, "go run ./cmd/proof -seed 11 -schedules 6", rep.Replay)
}

func TestTheBoltLedger(t *testing.T) {
	var out bytes.Buffer
	held := prove(t, options{seeds: []int64{5}, schedules: 12, ledger: "bolt", verbose: true}, &out, os.Stderr)
	assert.True(t, held, out.String())
	assert.Contains(t, out.String(), "ledger               bolt:")
	assert.NotContains(t, out.String(), " 0 of 12 schedules kept a durable ledger", "some schedules used the bolt file")
	assert.Contains(t, out.String(), "replay               go run ./cmd/proof -seed 5 -schedules 12 -ledger bolt\n")
	assert.Contains(t, out.String(), "random seed 5: rooms=", "-v prints one line per schedule")
}

func TestThePostgresLedger(t *testing.T) {
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		t.Skip(postgresEnv + " is not set: -ledger pg needs a PostgreSQL server (.ci/run starts one)")
	}
	var out bytes.Buffer
	held := prove(t, options{seeds: []int64{5}, schedules: 12, ledger: "pg", postgres: dsn}, &out, os.Stderr)
	assert.True(t, held, out.String())
	assert.Contains(t, out.String(), "ledger               pg:")
	assert.NotContains(t, out.String(), " 0 of 12 schedules kept a durable ledger", "some schedules used the database")
	assert.Contains(t, out.String(), "replay               go run ./cmd/proof -seed 5 -schedules 12 -ledger pg\n")
}

// A run over several master seeds says so in the receipt, and one with a
// seed drawn fresh prints it on stderr before it starts, so a crash or a
// timeout can still be replayed.
func TestSeveralMasterSeedsAndAFreshOne(t *testing.T) {
	stdout, stderr, code := runCommand(t, "-seed 3,4 -schedules 5")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "master seeds         3, 4\n")
	assert.Contains(t, stdout, "schedules            10 (5 per master seed)\n")
	assert.Contains(t, stdout, "replay               go run ./cmd/proof -seed 3,4 -schedules 5\n")
	assert.Contains(t, stdout, "exactly-once held across 10 schedules from 2 master seeds")

	stdout, stderr, code = runCommand(t, "-seed random -schedules 3")
	assert.Equal(t, 0, code)
	require.Contains(t, stderr, "(1 drawn fresh); replay with -seed ")
	seed := strings.TrimSpace(stderr[strings.LastIndex(stderr, " ")+1:])
	assert.Contains(t, stdout, "master seed          "+seed+"\n")
	assert.Contains(t, stdout, "go run ./cmd/proof -seed "+seed+" -schedules 3")
}

// With -v the run reports its progress even when stderr is no terminal.
func TestVerboseReportsProgress(t *testing.T) {
	_, stderr, code := runCommand(t, "-schedules 60 -v")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `proof: \d+/60 schedules\n`, stderr)
}

// -replicas N runs replicated schedules on the lease model, or on
// pgledger in PostgreSQL, and the receipt says so with its failover lines.
func TestReplicas(t *testing.T) {
	o, err := parseFlags([]string{"-replicas", "2"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2, o.replicas)
	for _, bad := range [][]string{{"-replicas", "1"}, {"-replicas", "2", "-ledger", "bolt"}, {"-replicas", "2", "-exhaustive"}} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%v", bad)
	}

	var out bytes.Buffer
	held := prove(t, options{seeds: []int64{5}, schedules: 12, ledger: "memory", replicas: 2}, &out, os.Stderr)
	assert.True(t, held, out.String())
	assert.Contains(t, out.String(), "replicas             12 of 12 schedules ran 2 replicas on one leased ledger")
	assert.Contains(t, out.String(), "failover             after a death:")
	assert.Contains(t, out.String(), "fenced-send")
	assert.Contains(t, out.String(), "replay               go run ./cmd/proof -seed 5 -schedules 12 -replicas 2\n")

	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		t.Skip(postgresEnv + " is not set: -ledger pg -replicas needs a PostgreSQL server (.ci/run starts one)")
	}
	out.Reset()
	held = prove(t, options{seeds: []int64{5}, schedules: 12, ledger: "pg", postgres: dsn, replicas: 2}, &out, os.Stderr)
	assert.True(t, held, out.String())
	assert.Contains(t, out.String(), "clocks not skewed")
	assert.Contains(t, out.String(), "replay               go run ./cmd/proof -seed 5 -schedules 12 -ledger pg -replicas 2\n")
}

func TestCPUProfileWritesAProfileOfTheRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.out")
	stdout, stderr, code := runCommand(t, "-schedules 4 -cpuprofile "+path)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "exactly-once held across 4 schedules")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, data[:2], "a pprof profile is gzipped")
}

func TestMemProfileWritesTheRunsAllocations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem.out")
	stdout, stderr, code := runCommand(t, "-schedules 4 -memprofile "+path)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "exactly-once held across 4 schedules")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, data[:2], "a pprof profile is gzipped")
}

func TestCPUProfileToAnUnwritablePathFails(t *testing.T) {
	_, stderr, code := runCommand(t, "-schedules 1 -cpuprofile "+filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.out"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "-cpuprofile")
}

// A replica started while the database was down opened its ledger a
// backoff (up to 5 s) after the database came back, not a poll: a
// graceful hand-over soon after waited 1.3 s for it, past the 1 s bar
// (seed 1172092072, of the fresh master seed 1172090876). pgledger's Open
// now retries no slower than a standby polls.
func TestAReplicaOpeningThroughAnOutageIsReadyForAHandOver(t *testing.T) {
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		t.Skip(postgresEnv + " is not set: -ledger pg -replicas needs a PostgreSQL server (.ci/run starts one)")
	}
	shell := durableConfig{kind: ledgerPG}
	drop, err := pgSchema(&shell, dsn)
	require.NoError(t, err)
	defer drop()
	r := proof.Simulate(t, proof.Random(1172092072, proof.GenOptions{Replicas: 2, NoSkew: true}),
		proof.Options{Agent: durableAgent(shell), DeadLettersTold: true})
	assert.Nil(t, r.Violation)
	require.NotEmpty(t, r.Failovers)
	assert.Equal(t, "handover", r.Failovers[len(r.Failovers)-1].Kind, "the schedule still ends in a timed hand-over")
}
