package verify

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func expectedSchedules(n int) int {
	total := 0
	for _, d := range allDefs {
		total += d.count(n)
	}
	return total
}

func TestTheEnvironmentOverridesTheSchedules(t *testing.T) {
	t.Setenv(EnvSchedules, "3")
	res := ExactlyOnce(newMockT(t), ReferenceAgent(), Schedules(50))
	require.True(t, res.OK, res.Reason)
	assert.Equal(t, expectedSchedules(3), res.Schedules)
}

func TestEachCheckRunsAloneWithItsOwnCount(t *testing.T) {
	res := KillAfterPost(newMockT(t), ReferenceAgent(), Schedules(7))
	require.True(t, res.OK, res.Reason)
	assert.Equal(t, 7, res.Schedules)
	res = LongRoom(newMockT(t), ReferenceAgent(), Schedules(7))
	require.True(t, res.OK, res.Reason)
	assert.Equal(t, 2, res.Schedules, "the long room runs a tenth, at least two")
	for _, c := range Checks {
		assert.NotEmpty(t, c.Doc, c.Name)
		assert.NotNil(t, c.Run, c.Name)
	}
	assert.Len(t, Checks, len(allDefs))
}

// forgetful replies under a key built from the attempt number, which
// changes when a message is delivered again.
var forgetful = Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	return &bandonce.Reply{Content: "hi", Mentions: []string{m.SenderID}, DedupKey: m.ID + ":" + strconv.Itoa(m.Attempt)}, nil
})

func TestTheReplayLineReplaysTheViolation(t *testing.T) {
	first := ExactlyOnce(newMockT(t), forgetful, Seed(100))
	require.False(t, first.OK)

	t.Setenv(EnvCheck, first.Check)
	t.Setenv(EnvSeed, strconv.FormatInt(first.FirstViolatingSeed, 10))
	t.Setenv(EnvSchedules, "1")
	m := newMockT(t)
	again := ExactlyOnce(m, forgetful)
	require.False(t, again.OK)
	assert.Equal(t, 1, again.Schedules)
	assert.Equal(t, first.Check, again.Check)
	assert.Equal(t, first.FirstViolatingSeed, again.FirstViolatingSeed)
	assert.Equal(t, first.Reason, again.Reason)
	assert.Equal(t, first.Witness, again.Witness)
	assert.Equal(t, first.Replay, again.Replay)
	assert.Contains(t, first.Replay, "-run '^"+t.Name()+"$'")
	assert.True(t, strings.HasSuffix(first.Replay, "' github.com/band-once/bandonce/verify"),
		"the replay names the test's package, so it works from the module's root: %s", first.Replay)
}

// The replay line names the package by the stack frame of its test, or
// the first frame outside the verifier; a package main's, which the stack
// calls "main", by its directory from the module's root.
func TestTheReplayLineNamesTheTestsPackage(t *testing.T) {
	for _, tc := range []struct{ frame, pkg, fn string }{
		{"example.com/agent/pager_test.TestPager.func1", "example.com/agent/pager_test", "TestPager.func1"},
		{"example.com/agent.TestX", "example.com/agent", "TestX"},
		{"main.TestY", "main", "TestY"},
		{"github.com/x/y.(*T).Run", "github.com/x/y", "(*T).Run"},
		{"nodot", "", ""},
	} {
		pkg, fn := splitFuncName(tc.frame)
		assert.Equal(t, tc.pkg, pkg, tc.frame)
		assert.Equal(t, tc.fn, fn, tc.frame)
	}
	assert.Equal(t, "github.com/band-once/bandonce/verify", testPackage(t.Name()), "this test's own frame")
	func() {
		assert.Equal(t, "./verify", testPackage("TestNotOnTheStack"), "no frame of the test and none outside the verifier: the directory")
	}()
	assert.Equal(t, "./verify", moduleRelativeDir(), "go test runs in the package's directory")
}

// quiet answers the messages whose label ends in an odd number only.
var quiet = Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	label := strings.Fields(m.Body())[0]
	if n, _ := strconv.Atoi(label[strings.LastIndexByte(label, 'm')+1:]); n%2 == 0 {
		return nil, nil
	}
	return &bandonce.Reply{Content: "hi", Mentions: []string{m.SenderID}}, nil
})

func TestMayNotReplyAcceptsAMessageConsumedWithoutAReply(t *testing.T) {
	res := ExactlyOnce(newMockT(t), quiet, quickly()...)
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "a lost reply")

	res = ExactlyOnce(newMockT(t), quiet, quickly(MayNotReply())...)
	assert.True(t, res.OK, res.Reason)
}

func TestWhatCannotBeExercisedIsSaid(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, Shell(ReferenceHandler, bandonce.Config{MaxAttempts: 1}), MaxAttempts(1), NoControlSignals(), Schedules(4))
	require.True(t, res.OK, res.Reason)
	notes := strings.Join(res.NotApplicable, "\n")
	assert.Contains(t, notes, "handler-errors: the agent gives up at its first failure")
	for _, check := range []string{"interrupt", "stop-and-play", "supersede"} {
		assert.Contains(t, notes, check+": "+noSocket)
	}
	assert.Len(t, m.Logs(), len(res.NotApplicable), "every note is logged")

	echo := Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "echo", Mentions: []string{m.SenderID}}, nil
	})
	res = ExactlyOnce(newMockT(t), echo, Schedules(4))
	require.True(t, res.OK, res.Reason)
	notes = strings.Join(res.NotApplicable, "\n")
	assert.Contains(t, notes, "handler-errors: the agent performed no external effect")
	assert.Contains(t, notes, "interrupt: the agent performed no external effect, so interrupts landed only between requests")
}

func TestOptionsResolve(t *testing.T) {
	c := newConfig([]Option{Schedules(0), Schedules(9), Seed(-4), MaxAttempts(0), MaxAttempts(5), nil})
	assert.Equal(t, 9, c.schedules)
	assert.Equal(t, int64(-4), c.seed)
	assert.Equal(t, 5, c.maxAttempts)
	assert.False(t, c.mayNotReply)
	assert.False(t, c.noControl)

	t.Setenv(EnvSchedules, "not a number")
	t.Setenv(EnvSeed, "12")
	t.Setenv(EnvCheck, "lost-ack, interrupt")
	c = newConfig(nil)
	assert.Equal(t, DefaultSchedules, c.schedules, "a bad value is not used")
	assert.Len(t, c.envErrs, 1, "but reported (falsegreens_test.go)")
	assert.Equal(t, int64(12), c.seed)
	assert.Equal(t, map[string]bool{"lost-ack": true, "interrupt": true}, c.only)
}
