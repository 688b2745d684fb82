package main

import (
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func replicaBin(t *testing.T) string { return build(t, "./testdata/replica") }

// testPostgres is the tests' PostgreSQL server (.ci/run starts one).
func testPostgres(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		t.Skip(postgresEnv + " is not set: this test needs a PostgreSQL server (.ci/run starts one; .ci/postgres start DIR prints a URL)")
	}
	return dsn
}

// The acceptance of issue 28's verify half: two built echo processes run
// at once as replicas on one PostgreSQL, through kills of the holder, its
// pauses past the lease and hand-overs, beside the storm's faults; every
// rule holds, the fence is judged at every change of holder, and the
// receipt reports the failovers it measured after each cause.
func TestVerifyHoldsForEchoRunAsTwoReplicas(t *testing.T) {
	t.Parallel()
	dsn := testPostgres(t)
	bin, echo := bandonceBin(t), echoBin(t)
	p := start(t, nil, bin, "verify", "-replicas", "2", "-postgres", dsn, "-schedules", "1", "-parallel", "4",
		"-check", "kill-after-post,pause-holder,hand-over,storm", "--", echo)
	code := p.wait(t, 10*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "exactly-once held across 4 schedules: 0 double-posts, 0 lost messages")
	assert.Contains(t, out, "replicas             2 at once, lease 3s")
	assert.Regexp(t, `fenced\s+[1-9]\d*\s+0\n`, out, "the fence was judged at changes of holder")
	for _, cause := range []string{"death", "pause", "hand-over"} {
		assert.Regexp(t, `after a `+cause+`: p50 \S+, p99 \S+, max \S+ \([1-9]\d*\)`, out, "failovers after a %s measured", cause)
	}
	assert.Contains(t, out, "replay               bandonce verify -seed 1 -schedules 1 -check kill-after-post,pause-holder,hand-over,storm -replicas 2 -- "+echo,
		"the replay repeats -replicas, never the database's URL")
	assert.NotContains(t, out, dsn)
}

// A replica that keeps serving after it lost its lease, its requests to
// Band unfenced, is caught the first time it is paused past its lease and
// wakes mid-turn: the witness names the schedule, the process and the
// request it sent after another replica took over.
func TestVerifyCatchesAReplicaWhoseWritesAreNotFenced(t *testing.T) {
	t.Parallel()
	dsn := testPostgres(t)
	bin, agent := bandonceBin(t), replicaBin(t)
	p := start(t, nil, bin, "verify", "-replicas", "2", "-postgres", dsn, "-schedules", "3", "-parallel", "3", "-shrink", "4",
		"-check", "pause-holder", "--", agent, "-unfenced")
	code := p.wait(t, 10*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `first violation      pause-holder, seed \d+: fenced: replica life \d+ \(pid \d+\) sent (POST|GET) .+ after life \d+ had taken over from it`, out)
	assert.True(t, slicesContain(witness(out), "SIGSTOP the holder's process group until another replica takes over"),
		"the witness holds the pause:\n%s", out)
	assert.Regexp(t, `replay it            bandonce verify -seed \d+ -schedules 1 -check pause-holder -replicas 2 -- \S+ -unfenced`, out)
}

// The same replica with its writes fenced holds under the same pauses:
// the test above catches the flag, not the pauses.
func TestVerifyHoldsForTheFencedReplicaUnderPauses(t *testing.T) {
	t.Parallel()
	dsn := testPostgres(t)
	bin, agent := bandonceBin(t), replicaBin(t)
	p := start(t, nil, bin, "verify", "-replicas", "2", "-postgres", dsn, "-schedules", "3", "-parallel", "3", "-check", "pause-holder", "--", agent)
	code := p.wait(t, 10*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `after a pause: p50 \S+, p99 \S+, max \S+ \([1-9]\d*\)`, out)
}

func slicesContain(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}

// Without -postgres, $BANDONCE_TEST_POSTGRES or PostgreSQL's server
// programs, -replicas cannot run, and says what to pass or install.
func TestVerifyReplicasWithoutPostgresSaysWhatToInstallOrPass(t *testing.T) {
	t.Parallel()
	bin := bandonceBin(t)
	p := start(t, []string{postgresEnv + "=", postgresBinEnv + "=" + t.TempDir()}, bin, "verify", "-replicas", "2", "--", "true")
	assert.Equal(t, exitCannot, p.wait(t, 30*time.Second))
	stderr := p.stderr.String()
	for _, want := range []string{"-replicas needs PostgreSQL", "pass -postgres postgres://", postgresEnv, "apt-get install postgresql", postgresBinEnv} {
		assert.Contains(t, stderr, want)
	}
}

func TestVerifyReplicasRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	bin := bandonceBin(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-replicas", "1", "--", "true"}, "-replicas must be 0 (one process at a time) or from 2 to 5"},
		{[]string{"-check", "pause-holder", "--", "true"}, "-check pause-holder acts on the holder among replicas: add -replicas 2"},
		{[]string{"-postgres", "postgres://x@127.0.0.1/db", "--", "true"}, "-postgres is for -replicas"},
		{[]string{"-replicas", "2", "-lease", "10ms", "--", "true"}, "-lease must be at least 300ms"},
		{[]string{"-replicas", "2", "-postgres", "postgres://x@127.0.0.1:1/db", "--", "true"}, "could not run: cannot connect to PostgreSQL to make a schedule's database"},
		{[]string{"-replicas", "2", "-postgres", "host=127.0.0.1 dbname=x", "--", "true"}, "-postgres must be a postgres:// URL"},
	}
	for _, c := range cases {
		p := start(t, nil, bin, append([]string{"verify"}, c.args...)...)
		assert.Equal(t, exitCannot, p.wait(t, 30*time.Second), "%v", c.args)
		assert.Contains(t, p.stderr.String(), c.want, "%v", c.args)
	}
}

// With neither -postgres nor $BANDONCE_TEST_POSTGRES, -replicas starts a
// PostgreSQL of its own on loopback from the machine's server programs,
// and stops it when it is done.
func TestVerifyReplicasStartsAndRemovesAThrowawayPostgres(t *testing.T) {
	t.Parallel()
	if _, err := serverBin(os.Getenv); err != nil {
		t.Skip("PostgreSQL's server programs are not installed: " + err.Error())
	}
	bin, echo := bandonceBin(t), echoBin(t)
	p := start(t, []string{postgresEnv + "="}, bin, "verify", "-replicas", "2", "-schedules", "1", "-check", "hand-over", "--", echo)
	code := p.wait(t, 5*time.Minute)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	m := regexp.MustCompile(`started a throwaway PostgreSQL for the replicas \(postgres@(127\.0\.0\.1:\d+)/`).FindStringSubmatch(p.stderr.String())
	require.NotNil(t, m, "it says it started one:\n%s", p.stderr.String())
	c, err := net.DialTimeout("tcp", m[1], time.Second)
	if err == nil {
		_ = c.Close()
	}
	assert.Error(t, err, "the throwaway server at %s is stopped", m[1])
}

// Two copies of an agent that elects no holder both serve: the second one
// to speak takes over, and the first one's next request is a fenced send.
func TestVerifyReplicasCatchesAnAgentThatElectsNoHolder(t *testing.T) {
	t.Parallel()
	dsn := testPostgres(t)
	bin, agent := bandonceBin(t), flawedBin(t)
	p := start(t, nil, bin, "verify", "-replicas", "2", "-postgres", dsn, "-no-socket", "-check", "kill-after-post", "-schedules", "1", "-shrink", "8", "--", agent)
	code := p.wait(t, 5*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `first violation      kill-after-post, seed 1: fenced: replica life \d+ \(pid \d+\) sent .+ after life \d+ had taken over from it`, out)
}
