package verify

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// Each test here is a way the verifier used to pass an agent, or a
// command, that it should have failed or remarked on.

func TestAnUnknownCheckNameFailsTheRun(t *testing.T) {
	t.Setenv(EnvCheck, "kil-after-post")
	for name, run := range map[string]func(testing.TB, Factory, ...Option) Result{
		"ExactlyOnce": ExactlyOnce, "KillAfterPost": KillAfterPost,
	} {
		m := newMockT(t)
		res := run(m, ReferenceAgent(), Schedules(2))
		assert.False(t, res.OK, name)
		assert.Zero(t, res.Schedules, "%s: nothing ran", name)
		require.Len(t, m.Errors(), 1, name)
		msg := m.Errors()[0]
		assert.Equal(t, msg, res.Reason, name)
		assert.Contains(t, msg, `BANDONCE_VERIFY_CHECK="kil-after-post": no check is named "kil-after-post"`, name)
		for _, c := range Checks {
			assert.Contains(t, msg, c.Name, "%s: the valid names are listed", name)
		}
	}

	t.Setenv(EnvCheck, "lost-ack, intrerupt,nope")
	m := newMockT(t)
	res := ExactlyOnce(m, ReferenceAgent())
	assert.False(t, res.OK)
	assert.Contains(t, res.Reason, `no check is named "intrerupt" or "nope"`)

	t.Setenv(EnvCheck, " , ")
	res = ExactlyOnce(newMockT(t), ReferenceAgent())
	assert.False(t, res.OK)
	assert.Contains(t, res.Reason, "names no check")
}

func TestAMalformedNumberFailsTheRun(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{EnvSchedules, "abc", `BANDONCE_VERIFY_SCHEDULES="abc" is not a positive whole number`},
		{EnvSchedules, "0", `BANDONCE_VERIFY_SCHEDULES="0" is not a positive whole number`},
		{EnvSchedules, "-3", `BANDONCE_VERIFY_SCHEDULES="-3" is not a positive whole number`},
		{EnvSchedules, "2.5", `BANDONCE_VERIFY_SCHEDULES="2.5" is not a positive whole number`},
		{EnvSeed, "20260616x", `BANDONCE_VERIFY_SEED="20260616x" is not a whole number`},
		{EnvSeed, "99999999999999999999", `BANDONCE_VERIFY_SEED="99999999999999999999" is not a whole number`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			m := newMockT(t)
			res := ExactlyOnce(m, ReferenceAgent(), Schedules(2))
			assert.False(t, res.OK)
			assert.Zero(t, res.Schedules)
			require.Len(t, m.Errors(), 1)
			assert.Contains(t, m.Errors()[0], tc.want)

			ledger := VerifyLedgerAgent(CleanEchoAgent, Schedules(2))
			assert.False(t, ledger.OK, "the 0.1 contract reads the same environment")
			assert.Contains(t, ledger.Reason, tc.want)
		})
	}
}

func TestUsableEnvironmentValuesRunAndAreLogged(t *testing.T) {
	t.Setenv(EnvCheck, " lost-ack ,kill-after-post")
	t.Setenv(EnvSchedules, " 3")
	t.Setenv(EnvSeed, "-7")
	m := newMockT(t)
	res := ExactlyOnce(m, ReferenceAgent(), Schedules(50))
	require.True(t, res.OK, res.Reason)
	assert.Equal(t, 6, res.Schedules, "two checks of three schedules")
	assert.Contains(t, strings.Join(m.Logs(), "\n"),
		"verify: from the environment: BANDONCE_VERIFY_SCHEDULES= 3 BANDONCE_VERIFY_SEED=-7 BANDONCE_VERIFY_CHECK= lost-ack ,kill-after-post")
}

// A reply Band refuses is reported with Band's code, not by what it led
// to ("a charged abort ... dead-lettered though drawn to succeed").
func TestAReplyBandRejectsIsReportedWithBandsCode(t *testing.T) {
	// (A reply with no mention is no longer one: the shell mentions the
	// sender. Mentioning the sender twice still is.)
	noMention := Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID, m.SenderID}}, nil
	})
	for name, run := range map[string]func(testing.TB, Factory, ...Option) Result{
		"ExactlyOnce": ExactlyOnce, "KillAfterPost": KillAfterPost, "Storm": Storm,
	} {
		m := newMockT(t)
		res := run(m, noMention, Schedules(3))
		require.False(t, res.OK, name)
		assert.Contains(t, res.Reason, "Band rejected the message the agent posted for r", name)
		assert.Contains(t, res.Reason, "answering 422 duplicate_mentions: the same participant is mentioned twice", name)
		assert.NotContains(t, res.Reason, "charged abort", name)
		require.Len(t, m.Errors(), 1, name)
		assert.Contains(t, m.Errors()[0], "422 duplicate_mentions", name)
	}

	stranger := Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "done", Mentions: []string{"someone-not-here"}}, nil
	})
	res := KillBeforePost(newMockT(t), stranger, Schedules(2))
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "Band rejected the message the agent posted for r")
	assert.Contains(t, res.Reason, "answering 422 mentioned_participant_not_in_room: mentioned participant is not in this chat (/message/mentions/0/id)")
}

// The agent: it charges through a client of its own, several
// times for one key. The verifier cannot see that, and says so; the same
// agent with its charges on External fails.
func TestAnAgentWithNoExternalEffectIsToldSo(t *testing.T) {
	var mu sync.Mutex
	charges := map[string]int{}
	ownClient := Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		mu.Lock()
		charges["charge:"+m.ID]++ // the author's own payment client
		mu.Unlock()
		return &bandonce.Reply{Content: "charged", Mentions: []string{m.SenderID}}, nil
	})
	m := newMockT(t)
	res := ExactlyOnce(m, ownClient, Schedules(4))
	require.True(t, res.OK, "what the verifier cannot see it cannot fail: %s", res.Reason)
	assert.Contains(t, res.NotApplicable, noEffectsNote)
	assert.Contains(t, m.Logs(), "verify: not exercised: "+noEffectsNote)
	mu.Lock()
	charged := 0
	for _, n := range charges {
		charged = max(charged, n)
	}
	mu.Unlock()
	require.Greater(t, charged, 1, "the agent did charge some key more than once")

	// A single check says it too.
	m = newMockT(t)
	res = KillAfterPost(m, ownClient, Schedules(2))
	require.True(t, res.OK, res.Reason)
	assert.Contains(t, m.Logs(), "verify: not exercised: "+noEffectsNote)

	// Routed through External, the same charges fail the run.
	routed := ShellWith(func(x *External) bandonce.Handler {
		return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := x.Effect(ctx, "charge:"+m.ID); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "charged", Mentions: []string{m.SenderID}}, nil
		}
	})
	res = ExactlyOnce(newMockT(t), routed, Schedules(4))
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "a non-idempotent side effect")

	// An agent that calls External is not told.
	m = newMockT(t)
	res = ExactlyOnce(m, ReferenceAgent(), Schedules(2))
	require.True(t, res.OK, res.Reason)
	assert.NotContains(t, res.NotApplicable, noEffectsNote)
}

// The reference agent runs the same through ShellWith on its own
// interface as through Shell with ExternalFrom.
func TestTheReferenceHandlerTakesItsEffectsAsAnInterface(t *testing.T) {
	var _ ReferenceEffects = (*External)(nil)
	a := ExactlyOnce(newMockT(t), ReferenceAgent(), Schedules(3))
	b := ExactlyOnce(newMockT(t), Shell(ReferenceHandler), Schedules(3))
	require.True(t, a.OK, a.Reason)
	require.True(t, b.OK, b.Reason)
	assert.Equal(t, a.Schedules, b.Schedules)

	// With no effects at all it still replies.
	reply, err := NewReferenceHandler(nil)(t.Context(), &bandonce.Message{ID: "m1", Content: "hi", SenderID: "ada"})
	require.NoError(t, err)
	assert.Equal(t, &bandonce.Reply{Content: "done: hi", Mentions: []string{"ada"}}, reply)
}

// go doc shows Checks by its type, not by the package's unexported check
// definitions.
func TestChecksDocumentationShowsNoUnexportedName(t *testing.T) {
	out, err := exec.Command("go", "doc", ".", "Checks").CombinedOutput()
	require.NoError(t, err, string(out))
	decl, _, _ := strings.Cut(string(out), "\n    ")
	assert.Contains(t, decl, "var Checks []Check")
	assert.NotContains(t, string(out), "def")
	require.Len(t, Checks, len(allDefs))
	for i, d := range allDefs {
		assert.Equal(t, d.name, Checks[i].Name)
		assert.Equal(t, d.doc, Checks[i].Doc)
	}
}
