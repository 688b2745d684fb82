package procverify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/cmdlog"
)

// newTestSim is a schedule's sim whose agent is command, not started.
func newTestSim(t *testing.T, cfg Config, sched *Schedule) *sim {
	t.Helper()
	if cfg.Command == nil {
		cfg.Command = []string{"sleep", "60"}
	}
	s, err := cfg.withDefaults()
	require.NoError(t, err)
	sm, err := newSim(context.Background(), s, sched)
	require.NoError(t, err)
	sm.start = time.Now()
	t.Cleanup(func() {
		if l := sm.current(); l != nil {
			sm.endLife(l, endKilled)
		}
		sm.close()
	})
	return sm
}

// Parallel schedules of one seed (two checks, or a shrink's trials) each
// get ids and a TMPDIR of their own: an agent that locks per agent id
// under TMPDIR, as Band's Python SDK does, never meets itself.
func TestEveryRunOfASeedGetsItsOwnIDsAndTMPDIR(t *testing.T) {
	s, err := Config{Command: []string{"true"}}.withDefaults()
	require.NoError(t, err)
	sched := &Schedule{Check: "kill-after-post", Seed: 1, Rooms: 1}
	a, err := newSim(context.Background(), s, sched)
	require.NoError(t, err)
	b, err := newSim(context.Background(), s, sched)
	require.NoError(t, err)
	other, err := newSim(context.Background(), s, &Schedule{Check: "lost-ack", Seed: 1, Rooms: 1})
	require.NoError(t, err)
	assert.NotEqual(t, a.agent.ID, b.agent.ID, "a seed's second run")
	assert.NotEqual(t, a.agent.ID, other.agent.ID, "another check of the seed")
	assert.NotEqual(t, a.tmp, b.tmp)

	env := a.agentEnv(&proxy{addr: "127.0.0.1:9"})
	assert.Contains(t, env, "TMPDIR="+a.tmp)
	assert.Contains(t, env, "TMP="+a.tmp)
	assert.Equal(t, 1, countPrefix(env, "TMPDIR="), "the verifier's own TMPDIR is replaced, not doubled")
	assert.Contains(t, env, "BAND_AGENT_ID="+a.agent.ID)

	info, err := os.Stat(a.tmp)
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	for _, sm := range []*sim{a, b, other} {
		sm.close()
	}
	_, err = os.Stat(a.tmp)
	assert.True(t, os.IsNotExist(err), "the schedule's TMPDIR is removed with it")
}

func countPrefix(env []string, prefix string) int {
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			n++
		}
	}
	return n
}

// Once a rule failed, a kill ends the life and starts no other: a
// replacement would only be SIGTERMed before it could install its
// handlers, and judged for it.
func TestNoLifeStartsAfterARuleFailed(t *testing.T) {
	sm := newTestSim(t, Config{}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, sm.startLife())
	sm.fail(AgentLifecycle, "a rule failed")
	sm.restart(sm.current(), nil)
	assert.Len(t, sm.lives, 1, "no new life")
	assert.Equal(t, endKilled, sm.current().reason())

	ok := newTestSim(t, Config{}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, ok.startLife())
	ok.restart(ok.current(), nil)
	assert.Len(t, ok.lives, 2, "without a failure a kill is followed by a new life")
}

// A life that has made no request yet (an interpreter still starting) is
// not sent SIGTERM at the end of a schedule: how it stops is not judged,
// and the receipt says so.
func TestASIGTERMBeforeALifesFirstRequestIsNotJudged(t *testing.T) {
	sm := newTestSim(t, Config{ConnectTimeout: 50 * time.Millisecond}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, sm.startLife())
	l := sm.current()
	sm.terminate()
	l.mu.Lock()
	termAt := l.termAt
	l.mu.Unlock()
	assert.True(t, termAt.IsZero(), "no SIGTERM was sent")
	res := sm.judge()
	assert.Nil(t, res.Violation)
	assert.Zero(t, res.Checks[TermExit], "sigterm was not judged")
	assert.True(t, slices.ContainsFunc(res.NotExercised, func(n string) bool { return strings.HasPrefix(n, "SIGTERM: ") }), "%v", res.NotExercised)
}

// A life that made its first request is sent SIGTERM and judged: sleep
// dies of the signal, which is not exit 0.
func TestASIGTERMAfterALifesFirstRequestIsJudged(t *testing.T) {
	sm := newTestSim(t, Config{Grace: 5 * time.Second}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, sm.startLife())
	l := sm.current()
	sm.arrive(l, "", "", "")
	sm.leave()
	sm.terminate()
	res := sm.judge()
	require.NotNil(t, res.Violation)
	assert.Equal(t, TermExit, res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "after SIGTERM; want exit 0")
}

// A life starting up is neither stalled nor quiet: the stall clock, and
// the request-bound events waiting on its requests, start at its first
// request.
func TestALifeStartingUpIsNeitherStalledNorQuiet(t *testing.T) {
	sm := newTestSim(t, Config{}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, sm.startLife())
	later := time.Now().Add(10 * time.Second)
	sm.mu.Lock()
	sm.progress, sm.lastSend = time.Now().Add(-time.Minute), time.Now().Add(-time.Minute)
	sm.mu.Unlock()
	assert.False(t, sm.quiet(later), "starting up")
	sm.arrive(sm.current(), "", "", "")
	sm.leave()
	assert.True(t, sm.quiet(later.Add(time.Second)), "asked, and nothing since")
}

// Every failure injected excuses one more quiet period: an agent that
// waits a 60 s cadence before each retry of a 5xx burst is not stalled,
// and a claim, mark or reply pays the debt back.
func TestEachFailureInjectedExcusesOneMoreQuietPeriod(t *testing.T) {
	sm := newTestSim(t, Config{}, &Schedule{Check: "t", Rooms: 1})
	assert.Equal(t, DefaultQuiet, sm.cfg.Quiet, "the default is above a 60 s cadence")
	sm.excuse(3)
	assert.Equal(t, 3, sm.owed)
	require.NoError(t, sm.startLife())
	sm.arrive(sm.current(), "", "", "") // a GET: not progress
	assert.Equal(t, 3, sm.owed)
	sm.arrive(sm.current(), "processing", "R", "M")
	assert.Zero(t, sm.owed, "progress")
	assert.Equal(t, 3, sm.owedTotal, "the schedule's deadline keeps every excuse")
	sm.leave()
	sm.leave()
}

// The receipt lists every violating schedule with each rule it broke and
// the line that replays it, in text and in JSON.
func TestTheReceiptListsEveryViolatingSchedule(t *testing.T) {
	s, err := Config{Command: []string{"agent"}, Seed: 5}.withDefaults()
	require.NoError(t, err)
	bad := func(check string, seed int64, found ...*Violation) Result {
		r := Result{Schedule: &Schedule{Check: check, Seed: seed}, Violation: found[0], Found: map[Invariant]*Violation{}}
		for _, f := range found {
			r.Found[f.Invariant] = f
		}
		return r
	}
	rep := newReport(s)
	rep.add(s, []Result{
		bad("kill-after-post", 5, &Violation{NoDoublePost, "r1m1 got 2 replies"}),
		{Schedule: &Schedule{Check: "kill-after-post", Seed: 6}},
		bad("storm", 7, &Violation{NonePending, "r1m2 was left \"processing\""}, &Violation{Quiet, "stuck"}),
	})
	rep.finish(time.Second)
	require.Len(t, rep.ViolatingSchedules, 2)
	assert.Equal(t, ViolatingSchedule{Check: "storm", Seed: 7, Rules: []BrokenRule{
		{NonePending, "r1m2 was left \"processing\""}, {Quiet, "stuck"},
	}, Replay: "bandonce verify -seed 7 -schedules 1 -check storm -- agent"}, rep.ViolatingSchedules[1])

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), "kill-after-post, seed 5: no-double-post: r1m1 got 2 replies")
	assert.Contains(t, text.String(), "and quiet: stuck")
	assert.Contains(t, text.String(), "replay: bandonce verify -seed 5 -schedules 1 -check kill-after-post -- agent")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back struct {
		Violations []ViolatingSchedule `json:"violations"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.Equal(t, rep.ViolatingSchedules, back.Violations)
}

// The socket watcher reads the fake's frames as they pass to the agent:
// a correlation id split across two reads is still found, the join of
// the control topic and the supersede push are noted, and what it carries
// between reads stays bounded however long a frame is.
func TestTheSocketWatcherFindsPushesAcrossReads(t *testing.T) {
	l := &life{}
	c := &watchedSocket{l: l}
	c.scan([]byte(`[null,"1","agent_control:a1","phx_reply",{"status":"ok"}]`))
	assert.True(t, c.joined.Load(), "the control topic's join was answered")
	frame := `[null,null,"agent_control:a1","agent.control",{"mode":"interrupt","correlation_id":"corr-42"}]`
	c.scan([]byte(frame[:len(frame)-20]))
	c.scan([]byte(frame[len(frame)-20:]))
	assert.True(t, l.waitPush("corr-42", 0), "an id split across two reads")
	c.scan([]byte(`[null,null,"agent_control:a1","supersede",{}]`))
	assert.True(t, l.waitPush(supersedeMark, 0))
	c.scan(bytes.Repeat([]byte("x"), 1<<20))
	assert.LessOrEqual(t, len(c.carry), maxMark, "what is carried between reads is bounded")
	assert.False(t, l.waitPush("nope", 0))
}

// The output kept for the receipt is the last keepLines lines, however
// much the agent writes.
func TestTheAgentsOutputKeptIsBounded(t *testing.T) {
	var echoed []string
	o := newOutputTail(func(line string) { echoed = append(echoed, line) }, "[life 1] ")
	for i := range 100 {
		o.add(fmt.Sprint("line ", i))
	}
	close(o.done)
	lines := o.Lines()
	require.Len(t, lines, keepLines)
	assert.Equal(t, "line 99", lines[len(lines)-1])
	assert.Len(t, echoed, 100)
	assert.Equal(t, "[life 1] line 0", echoed[0])
}

// A line longer than cmdlog.MaxLine (8 MiB, no newline, as a runaway
// agent writes) is kept cut, with how much was cut, and the lines after it
// as usual: the pipe is drained and no line is held whole.
func TestALongLineOfTheAgentsOutputIsCut(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	o := newOutputTail(nil, "")
	go o.drain(r)
	long := bytes.Repeat([]byte("x"), 8<<20)
	_, err = w.Write(append(long, "\nnext\n"...))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	<-o.done
	want := strings.Repeat("x", cmdlog.MaxLine) + fmt.Sprintf(" [%d bytes cut]", len(long)-cmdlog.MaxLine)
	assert.Equal(t, []string{want, "next"}, o.Lines())
}

// The whole engine against a real process: an unguarded Python poller
// (cmd/bandonce's testdata) doubles its reply when killed after the POST
// was applied, and Run names the rule, lists the schedule and shrinks a
// witness that starts with the message.
func TestRunCatchesARealAgentThatDoublesItsReply(t *testing.T) {
	catchesTheUnguardedPoller(t)
}

// The same poller whose turns take 3 s, longer than the stall window: the
// kill aimed at its reply waits for the reply rather than fire while it
// thinks, so a slow agent meets it too.
func TestRunCatchesASlowAgentThatDoublesItsReply(t *testing.T) {
	catchesTheUnguardedPoller(t, "--think=3")
}

func catchesTheUnguardedPoller(t *testing.T, args ...string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python agent cannot run")
	}
	rep, err := Run(t.Context(), Config{
		Command: append([]string{python, "../../cmd/bandonce/testdata/unguarded_poller.py"}, args...), NoSocket: true,
		Checks: []string{"kill-after-post"}, Schedules: 1, ShrinkBudget: 2, Seed: 1,
	})
	require.NoError(t, err)
	assert.False(t, rep.Held)
	require.Len(t, rep.ViolatingSchedules, 1)
	assert.Equal(t, NoDoublePost, rep.ViolatingSchedules[0].Rules[0].Rule)
	require.NotNil(t, rep.First)
	assert.Equal(t, NoDoublePost, rep.First.Invariant)
	require.NotEmpty(t, rep.First.Witness)
	assert.Contains(t, rep.First.Witness[0], "a human says")
	assert.Positive(t, rep.Faults["kill_after_apply"])
	assert.Equal(t, 1, rep.Schedules)
	assert.Contains(t, rep.ViolatingSchedules[0].Replay, "bandonce verify -seed 1 -schedules 1 -check kill-after-post -- ")
}
