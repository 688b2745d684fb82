package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/procverify"
)

// witness returns the witness lines of a receipt.
func witness(receipt string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(receipt, "\n") {
		switch {
		case strings.HasPrefix(line, "minimal witness"):
			in = true
		case in && regexp.MustCompile(`^\s+\d+\. `).MatchString(line):
			out = append(out, strings.TrimSpace(line))
		case in:
			return out
		}
	}
	return out
}

func TestVerifyHoldsForTheEchoExample(t *testing.T) {
	t.Parallel()
	bin, echo := bandonceBin(t), echoBin(t)
	p := start(t, nil, bin, "verify", "-schedules", "2", "-check", "kill-after-post,lost-ack,interrupt,stop-and-play,supersede", "--", echo)
	code := p.wait(t, 2*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "exactly-once held across 10 schedules: 0 double-posts, 0 lost messages")
	assert.Contains(t, out, "replay               bandonce verify -seed 1 -schedules 2 -check kill-after-post,lost-ack,interrupt,stop-and-play,supersede -- "+echo)
	assert.Regexp(t, `interrupt-silence\s+[1-9]\d*\s+0`, out, "interrupts reached the agent and were judged")
	assert.Regexp(t, `supersede\s+[1-9]\d*\s+0`, out, "supersedes reached the agent and were judged")
}

func TestVerifyCatchesAnUnguardedPythonPollerWithAMinimalWitness(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python agent cannot run")
	}
	bin := bandonceBin(t)
	agent, err := filepath.Abs("testdata/unguarded_poller.py")
	require.NoError(t, err)
	p := start(t, nil, bin, "verify", "-no-socket", "-check", "kill-after-post", "-schedules", "2", "--", python, agent)
	code := p.wait(t, 3*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `first violation      kill-after-post, seed \d+: no-double-post: r1m1 got 2 replies`, out)
	assert.Equal(t, []string{
		`1. a human says "r1m1" in room 1`,
		"2. on the 1st POST messages (a reply): SIGKILL the agent's process group, then apply the request (its answer is lost)",
	}, witness(out))
	assert.Regexp(t, `replay it            bandonce verify -seed \d+ -schedules 1 -check kill-after-post -no-socket -- `, out)
	assert.Contains(t, out, "exactly-once did NOT hold")
}

func TestVerifyCatchesAGoAgentThatAcknowledgesBeforeItPosts(t *testing.T) {
	t.Parallel()
	bin, agent := bandonceBin(t), flawedBin(t)
	p := start(t, nil, bin, "verify", "-no-socket", "-check", "kill-before-post", "-schedules", "1", "--", agent, "-ack-first")
	code := p.wait(t, 3*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "one-outcome: r1m1 was marked processed before its reply was posted")
	assert.Equal(t, []string{`1. a human says "r1m1" in room 1`}, witness(out))
}

func TestVerifyCatchesAnAgentThatTellsTheRoomItGaveUpOnAnAnsweredMessage(t *testing.T) {
	t.Parallel()
	bin, agent := bandonceBin(t), flawedBin(t)
	p := start(t, nil, bin, "verify", "-no-socket", "-check", "kill-before-post", "-schedules", "1", "--", agent, "-tell-answered")
	code := p.wait(t, 3*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "one-outcome: r1m1 was answered, yet its room was told it was given up on")
}

// An agent that hears Band's signals and ignores them breaks the rule
// each check is about, and the witness holds the signal at the claim.
func TestVerifyCatchesAnAgentDeafToSignals(t *testing.T) {
	t.Parallel()
	bin, agent := bandonceBin(t), flawedBin(t)
	for check, reason := range map[string]string{
		"interrupt":     "interrupt-silence: r1m1's reply was sent after the interrupt reached the agent",
		"stop-and-play": "stop-silence: the agent sent a reply in room 1 after its stop reached it, before play",
		"supersede":     "supersede: the agent (life 1)",
	} {
		t.Run(check, func(t *testing.T) {
			t.Parallel()
			p := start(t, nil, bin, "verify", "-check", check, "-schedules", "3", "-grace", "3s", "--", agent, "-deaf")
			code := p.wait(t, 3*time.Minute)
			out := p.stdout.String()
			require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
			assert.Contains(t, out, reason)
			assert.LessOrEqual(t, len(witness(out)), 2, "a message and the signal:\n%s", out)
		})
	}
}

// A supersede that comes last, well after the last message was said, finds
// the agent done with everything and leaves it nothing to send: a deaf agent is caught by still running, however early
// the schedule runs out (CI once saw three such schedules pass).
func TestVerifyCatchesADeafAgentSupersededLast(t *testing.T) {
	t.Parallel()
	check, ok := procverify.CheckNamed("supersede")
	require.True(t, ok)
	seed := int64(-1)
	for s := range int64(1000) {
		events := check.Build(s, true).Events
		if last := events[len(events)-1]; last.Kind == procverify.Supersede && last.After >= 400*time.Millisecond {
			seed = s
			break
		}
	}
	require.NotEqual(t, int64(-1), seed, "some seed puts the supersede last")
	bin, agent := bandonceBin(t), flawedBin(t)
	p := start(t, nil, bin, "verify", "-seed", strconv.FormatInt(seed, 10), "-check", "supersede", "-schedules", "1", "-shrink", "0", "-grace", "2s", "--", agent, "-deaf")
	code := p.wait(t, 2*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `supersede: the agent \(life 1\) (was still running|sent)`, out)
}

func TestVerifyCannotRunSaysWhy(t *testing.T) {
	t.Parallel()
	bin := bandonceBin(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--", "/nonexistent/agent"}, "could not run: the agent's command was not found"},
		{[]string{"-connect-timeout", "300ms", "--", "sleep", "60"}, "could not run: the agent never connected: no request reached BAND_BASE_URL within 300ms"},
		{[]string{"--", "sh", "-c", "echo the key is missing >&2; exit 3"}, "could not run: the agent never connected: it ended (exit status 3) before its first request"},
		{[]string{"-check", "nope", "--", "true"}, `-check: unknown check "nope"`},
		{[]string{"-grace", "-5s", "--", "true"}, "-grace must be positive, not -5s"},
		{[]string{"-quiet", "0s", "--", "true"}, "-quiet must be positive, not 0s"},
		{[]string{"-connect-timeout", "-1s", "--", "true"}, "-connect-timeout must be positive"},
		{[]string{"-parallel", "-2", "--", "true"}, "-parallel must be at least 1"},
		{[]string{"-shrink", "-3", "--", "true"}, "-shrink must be 0 (do not shrink) or more"},
		{nil, "no agent command"},
	}
	for _, c := range cases {
		p := start(t, nil, bin, append([]string{"verify"}, c.args...)...)
		assert.Equal(t, exitCannot, p.wait(t, 30*time.Second), "%v", c.args)
		assert.Contains(t, p.stderr.String(), c.want, "%v", c.args)
	}
	p := start(t, nil, bin, "verify", "--", "sh", "-c", "echo the key is missing >&2; exit 3")
	p.wait(t, 30*time.Second)
	assert.Contains(t, p.stderr.String(), "| the key is missing", "the agent's last words are shown")
}

// -shrink 0 reports the first violation as found, unshrunk, rather than
// falling back to the default budget.
func TestVerifyShrinkZeroDoesNotShrink(t *testing.T) {
	o, err := parseVerify([]string{"-shrink", "0", "--", "true"}, io.Discard)
	require.NoError(t, err)
	assert.Negative(t, o.cfg.ShrinkBudget, "procverify's do-not-shrink")
	o, err = parseVerify([]string{"--", "true"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 48, o.cfg.ShrinkBudget)
}

// No process of the agent survives a run, whatever ends it: the agent
// leaves a child in its group and one in a session of its own, in every
// life; every pid is checked after bandonce verify exits.
func TestVerifyLeavesNoProcessOfTheAgentBehind(t *testing.T) {
	t.Parallel()
	bin, echo, flawed := bandonceBin(t), echoBin(t), flawedBin(t)
	spawner, err := filepath.Abs("testdata/spawner.sh")
	require.NoError(t, err)
	run := func(t *testing.T, agent string, args ...string) (*proc, string) {
		pids := filepath.Join(t.TempDir(), "pids")
		p := start(t, []string{"PIDS=" + pids, "AGENT=" + agent}, bin,
			append([]string{"verify", "-no-socket", "-check", "kill-after-post", "-schedules", "1", "-shrink", "4", "--", spawner}, args...)...)
		return p, pids
	}
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		p, pids := run(t, echo)
		require.Equal(t, exitOK, p.wait(t, 2*time.Minute), "stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
		got := readPids(t, pids)
		assert.GreaterOrEqual(t, len(got), 6, "the preflight's life and the schedule's each spawned")
		requireAllGone(t, got)
	})
	t.Run("violated", func(t *testing.T) {
		t.Parallel()
		p, pids := run(t, flawed, "-ack-first")
		require.Equal(t, exitViolated, p.wait(t, 2*time.Minute), "stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
		requireAllGone(t, readPids(t, pids))
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		p, pids := run(t, echo)
		deadline := time.Now().Add(30 * time.Second)
		for len(readPids(t, pids)) < 6 { // the preflight's and the first schedule's
			require.True(t, time.Now().Before(deadline), "the agent never started twice")
			time.Sleep(5 * time.Millisecond)
		}
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
		require.Equal(t, exitCannot, p.wait(t, 30*time.Second))
		assert.Contains(t, p.stderr.String(), "interrupted before a verdict")
		requireAllGone(t, readPids(t, pids))
	})
}

// bandonce verify hands the agent neither a Band SDK variable of its own
// environment (BAND_* nor THENVOI_*) nor a URL off loopback, and the
// receipt names what it withheld, never the values.
func TestVerifyWithholdsSDKVariablesAndURLsOffLoopback(t *testing.T) {
	t.Parallel()
	bin, echo := bandonceBin(t), echoBin(t)
	dir := t.TempDir()
	dump := filepath.Join(dir, "env")
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nenv >> \"$ENV_DUMP\"\nexec \"$ECHO_AGENT\"\n"), 0o755))
	const realKey = "band_a_REALKEYthatmustneverreachtheagent"
	p := start(t, []string{
		"ENV_DUMP=" + dump, "ECHO_AGENT=" + echo,
		"THENVOI_API_KEY=" + realKey, "THENVOI_REST_URL=https://app.band.ai", "BAND_LOG_LEVEL=debug",
		"MODEL_BASE_URL=https://api.model.example/v1", "LOCAL_CACHE_URL=http://127.0.0.1:9/cache",
	}, bin, "verify", "-json", "-schedules", "1", "-check", "kill-before-post", "--", agent)
	code := p.wait(t, 2*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())

	data, err := os.ReadFile(dump)
	require.NoError(t, err)
	env := string(data)
	assert.NotContains(t, env, realKey)
	assert.NotContains(t, env, "app.band.ai")
	assert.NotContains(t, env, "api.model.example")
	assert.NotContains(t, env, "BAND_LOG_LEVEL")
	assert.Contains(t, env, "LOCAL_CACHE_URL=http://127.0.0.1:9/cache", "a loopback URL is passed on")
	assert.Regexp(t, `(?m)^THENVOI_REST_URL=http://127\.0\.0\.1:\d+$`, env, "the legacy names point at the fake too")

	var rep procverify.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	withheld := map[string]string{}
	for _, w := range rep.Withheld {
		withheld[w.Name] = w.Reason
	}
	assert.Equal(t, procverify.WithheldSDK, withheld["THENVOI_API_KEY"])
	assert.Equal(t, procverify.WithheldSDK, withheld["THENVOI_REST_URL"])
	assert.Equal(t, procverify.WithheldSDK, withheld["BAND_LOG_LEVEL"])
	assert.Equal(t, procverify.WithheldURL, withheld["MODEL_BASE_URL"])
	assert.NotContains(t, withheld, "LOCAL_CACHE_URL")
	assert.NotContains(t, out, realKey, "the receipt names variables, never their values")
}

// Each flag of the flawed agent breaks one rule, and bandonce verify names
// that rule with a witness that starts with the message it concerns.
func TestVerifyNamesTheRuleEachFlawBreaks(t *testing.T) {
	t.Parallel()
	bin, agent := bandonceBin(t), flawedBin(t)
	for _, c := range []struct {
		flag, check string
		extra       []string
		verdict     string // a regexp of the first violation's line
		rule        string // the rule the flag breaks, failed in the receipt's table
	}{
		{"-ack-first", "kill-before-post", nil, `one-outcome: r\dm\d was marked processed before its reply was posted`, "one-outcome"},
		{"-quit", "transient-errors", []string{"-shrink", "1"}, `agent-lifecycle: the agent \(life \d+\) exited on its own`, "agent-lifecycle"},
		// -quiet 5s: the default waits out a 60 s retry cadence.
		{"-one-only", "transient-errors", []string{"-shrink", "1", "-quiet", "5s"}, `none-pending: r\dm\d was left "`, "none-pending"},
		// A mark that never comes leaves its message pending too, which is
		// judged first; the stall is the quiet rule's.
		{"-hang-ack", "transient-errors", []string{"-shrink", "1", "-quiet", "5s"}, `none-pending: r\dm\d was left "processing"`, "quiet"},
		{"-no-term", "transient-errors", []string{"-shrink", "1", "-grace", "1s"}, `sigterm: the agent was still running \S+ after SIGTERM`, "sigterm"},
		{"-remember", "kill-before-post", []string{"-shrink", "1"}, `no-double-write: a memory written twice under key "flawed:mem:[0-9a-f-]+"`, "no-double-write"},
		{"-fail-after-reply", "transient-errors", []string{"-shrink", "1"}, `one-outcome: a failed acknowledgement became a failure: r\dm\d was marked failed after its reply was posted`, "one-outcome"},
	} {
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"verify", "-no-socket", "-check", c.check, "-schedules", "1"}, c.extra...) // a later -schedules wins
			p := start(t, nil, bin, append(args, "--", agent, c.flag)...)
			code := p.wait(t, 3*time.Minute)
			out := p.stdout.String()
			require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
			assert.Regexp(t, `first violation      `+c.check+`, seed \d+: `+c.verdict, out)
			if c.rule == "sigterm" {
				assert.Contains(t, out, "then SIGTERM, exit 0 expected", "the witness is the schedule's end")
			} else {
				w := witness(out)
				require.NotEmpty(t, w, "a witness:\n%s", out)
				assert.Regexp(t, `^1\. (\S+ later: )?a human says "r\dm\d" in room \d$`, w[0])
			}
			assert.Regexp(t, `(?m)^\s*`+c.rule+`\s+[1-9]\d*\s+[1-9]`, out, "the rule judged the flaw and failed it")
		})
	}
}

// Exiting non-zero when superseded is band-once's convention, not Band's:
// an agent that stops and exits 0, as Band's Python SDK does, passes the
// supersede check unless -supersede-exit asks for the convention.
func TestVerifyJudgesASupersededExitCodeOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	bin, agent := bandonceBin(t), flawedBin(t)
	p := start(t, nil, bin, "verify", "-check", "supersede", "-schedules", "2", "--", agent, "-polite")
	code := p.wait(t, 2*time.Minute)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())

	p = start(t, nil, bin, "verify", "-check", "supersede", "-schedules", "2", "-shrink", "1", "-supersede-exit", "--", agent, "-polite")
	code = p.wait(t, 2*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitViolated, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Regexp(t, `supersede: the agent \(life \d+\) exited 0 after it was superseded; -supersede-exit asks for a non-zero status`, out)
	assert.Contains(t, out, "-supersede-exit --", "the replay line keeps the flag")
}

// A correct agent with the habits of Band's Python SDK (4 s before its
// first request, a 60 s retry cadence, exit 0 when superseded) passes at
// the defaults, every check's schedule at once: each run of a seed has
// ids and a TMPDIR of its own, no life starts after a failure, no SIGTERM
// comes before a life's first request, and the stall limit waits out the
// cadence once per failure injected: seed 2's schedules inject lost
// answers and a 429. The number of schedules and how many run at once
// are not among the timings the agent's habits meet.
func TestVerifyPassesAPatientAgentAtItsDefaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the patient agent takes over a minute: some schedules wait out a 60 s cadence")
	}
	bin, agent := bandonceBin(t), patientBin(t)
	p := start(t, nil, bin, "verify", "-seed", "2", "-schedules", "1", "-parallel", "12", "--", agent)
	code := p.wait(t, 8*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "exactly-once held across 12 schedules")
	assert.Regexp(t, `(?m)^\s*(lost_response|server_5xx|throttle_429_retry_after)\s+[1-9]`, out, "a failure was injected: the agent waited out its cadence")
	for _, rule := range []string{"supersede", "sigterm", "interrupt-silence", "stop-silence", "quiet"} {
		assert.Regexp(t, `(?m)^\s*`+rule+`\s+[1-9]\d*\s+0$`, out, "%s was judged", rule)
	}
}

// Echo whose every reply takes longer than the verifier's 2 s stall timer
// (ECHO_DELAY) holds too: the stalled schedule fires its next event (a
// kill then hits the agent mid-turn) and no rule mistakes slowness for a
// fault.
func TestVerifyHoldsForTheEchoExampleAtSlowerTimings(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("every reply waits 2.5 s: a minute of schedules")
	}
	bin, echo := bandonceBin(t), echoBin(t)
	p := start(t, []string{"ECHO_DELAY=2500ms"}, bin, "verify", "-schedules", "1", "-parallel", "6", "--", echo)
	code := p.wait(t, 10*time.Minute)
	out := p.stdout.String()
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, p.stderr.String())
	assert.Contains(t, out, "exactly-once held across 12 schedules: 0 double-posts, 0 lost messages")
}
