package proof

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The real Shell, through the real HTTP stack, under random schedules
// with the default master seed.
func TestShellHoldsUnderRandomSchedules(t *testing.T) {
	n := 300
	if raceEnabled {
		n = 120
	}
	rep := Run(t, RunConfig{Seed: 20260616, Schedules: n})
	if !assert.True(t, rep.Held) {
		f := rep.First
		t.Logf("first violation: seed %d %s: %s; witness (%s):", f.Seed, f.Invariant, f.Reason, f.Setting)
		for _, w := range f.Witness {
			t.Logf("  %s", w)
		}
	}
	assert.Equal(t, n, rep.Schedules)
	for _, kind := range []string{"kill_before_send", "kill_after_apply", "lost_response", "server_5xx", "stop", "interrupt", "room_joined", "push_lost"} {
		assert.Positive(t, rep.Faults[kind], "fault %s never fired", kind)
	}
}

// The real Shell under every single and double kill point of small
// worlds, both kinds of kill.
func TestShellHoldsUnderExhaustiveKills(t *testing.T) {
	cfg := RunConfig{Seed: 20260616, Exhaustive: true}
	if raceEnabled {
		cfg.ExhaustiveMessages = 1
	}
	rep := Run(t, cfg)
	require.NotNil(t, rep.Exhaustive)
	c := rep.Exhaustive
	assert.True(t, rep.Held, "first violation: %+v", rep.First)
	assert.Equal(t, c.Total, rep.Schedules)
	assert.Equal(t, c.Baselines+c.Singles+c.Pairs, c.Total)
	assert.GreaterOrEqual(t, c.Singles, 2*c.KillPoints, "both kinds at every kill point")
	assert.LessOrEqual(t, c.Singles, 2*c.KillPoints+len(c.Configurations), "at most one kill at a stall per configuration")
	assert.Greater(t, c.Pairs, c.Singles)
	assert.Equal(t, c.Singles+2*c.Pairs, c.RequestKills+c.StallKills, "every kill enumerated is counted once")
	// Every enumerated kill fired where it was drawn: at its request, or
	// at the stall that comes before the requests past it.
	assert.Equal(t, c.RequestKills, rep.Faults["kill_before_send"]+rep.Faults["kill_after_apply"],
		"every kill drawn at a request fired at it")
	assert.Equal(t, c.StallKills, rep.Faults["kill_idle"], "every kill drawn at a stall fired there")
}

// Regression, found by the prover: after an ambiguous reply POST the
// Shell re-read the room and posted again even though an interrupt had
// reached it in between. Gate indices: 1 me, 2 chats, 3 socket, 4 next,
// 5 processing, 6 post (429), 7 the re-guard read.
func TestShellRepostsAfterInterrupt(t *testing.T) {
	s := &Schedule{Seed: 1, Rooms: 1, Name: "repost after interrupt", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{At: 1, Kind: Throttle, Endpoint: fakeband.EndpointPost, Status: 429},
		{At: 7, Kind: Interrupt, Room: 0},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "the reply must not be posted after the interrupt reached the Shell")
}

// Regression, found by the prover: the cycle was armed before GET /next
// answered, so an interrupt during a slow (or retried) /next consumed the
// message it then served, even one posted after the interrupt, without
// running the handler.
func TestShellInterruptConsumesALaterMessage(t *testing.T) {
	s := &Schedule{Seed: 1, Rooms: 1, Name: "interrupt consumes a later message", Events: []Event{
		{At: 1, Kind: Latency, Endpoint: fakeband.EndpointNext, Delay: time.Second},
		{At: 5, After: 100 * time.Millisecond, Kind: Interrupt, Room: 0},
		{At: 5, After: 200 * time.Millisecond, Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "a message posted after the interrupt must still be answered")
}

// Regression (issue 19, class 1), the prover's minimal witness of seed
// 3636: a play sent while the socket was down never reached the Shell,
// and a stopped room that never asked /next again while the socket was
// up left the message said after it unanswered for good.
func TestShellStoppedRoomHearsALostPlay(t *testing.T) {
	s := &Schedule{Seed: 3636, Rooms: 1, Name: "lost play", Events: []Event{
		{At: 4, Kind: Stop, Room: 0},
		{At: 5, Kind: DropSocket},
		{At: 5, Kind: Play, Room: 0},
		{At: 7, Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m3", Outcome: Reply}},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "the room must find Band's gate open again")
	assert.Equal(t, 1, res.Replies)
}

// The same with the play's push lost on a live socket, and with nothing
// said after it: only the stopped room's periodic probe can find the
// message the stop left processing.
func TestShellStoppedRoomHearsAPlayLostOnALiveSocket(t *testing.T) {
	s := &Schedule{Seed: 5, Rooms: 1, Name: "play lost on a live socket", Events: []Event{
		{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m1", Outcome: Reply, Slow: 2 * time.Second}},
		{At: 5, After: time.Second, Kind: Stop, Room: 0},
		{At: 6, After: time.Second, Kind: Play, Room: 0, Push: PushLost},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "the stopped message must be answered once the gate is open")
	assert.Equal(t, 1, res.Replies)
	assert.Equal(t, 1, res.Faults["stop"])
	assert.Equal(t, 1, res.Faults["play"])
}

// Regression (issue 19, class 2), the prover's minimal witness of seed
// 23258: an interrupt sent while room 2 was between messages had its push
// queued behind a late play; it reached the Shell during r2m4's cycle and
// consumed r2m4, as an interrupt must (a push names no turn, so the
// agent applies it to the one in flight when it arrives). The oracle had
// dated its arrival by the first bytes read after it was sent, the late
// play's, and so convicted the Shell of losing r2m4.
func TestOracleDatesALatePushByItsOwnArrival(t *testing.T) {
	s := &Schedule{Seed: 23258, Rooms: 2, Name: "late interrupt behind a late play", Events: []Event{
		{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m2", Outcome: Reply, Key: "nk:r1:a"}},
		{At: 7, Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m3", Outcome: Reply, Slow: 1147 * time.Millisecond}},
		{At: 7, Kind: Play, Room: 0, Push: PushLate, Delay: 787 * time.Millisecond},
		{At: 8, Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m4", Outcome: Reply, Slow: 291 * time.Millisecond}},
		{At: 12, Kind: Interrupt, Room: 1, Push: PushLate, Delay: 647 * time.Millisecond},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 2, res.Faults["push_late"])
	assert.Equal(t, 1, res.Interrupted, "r2m4 was consumed by the interrupt, not lost")
}

// A room the agent joins during the run, whose room_added push is lost:
// the Shell finds it by listing its rooms again.
func TestShellFindsARoomWhosePushWasLost(t *testing.T) {
	s := &Schedule{Seed: 9, Rooms: 2, Name: "room_added lost", Events: []Event{
		{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{At: 4, Kind: PushFault, PushEvent: "room_added", Push: PushLost},
		{At: 4, Kind: Join, Room: 1},
		{At: 5, Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m1", Outcome: Reply}},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "the new room's message must be answered")
	assert.Equal(t, 2, res.Replies)
	assert.Equal(t, 1, res.Faults["room_joined"])
	assert.Equal(t, 1, res.Faults["push_lost"])
}

// Regression (found by interrupt-consumes, failing until the Shell is
// fixed): an interrupt reaches the Shell while its reply's guard read of
// /context is being retried after a 502, before the fate is committed.
// The cycle records the interrupt, but when the guard read then fails for
// good, post() returns through r.failed("GET context") with the reply
// kept in r.unsent and the interrupt forgotten; Band serves the message
// again and the same life posts the reply the user interrupted. Gate
// indices: 1 me, 2 chats, 3 socket, 4 next, 5 processing, 6 context (502),
// 7 the retried read, parked when the interrupt arrives.
func TestShellKeepsAnInterruptThatLandsDuringTheGuardRead(t *testing.T) {
	s := &Schedule{Seed: 1, Rooms: 1, Name: "interrupt during a failing guard read", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply, Key: "nk:a"}},
		{At: 1, Kind: ServerError, Endpoint: fakeband.EndpointContext, Status: 502, Count: 3},
		{At: 7, Kind: Interrupt, Room: 0},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "the interrupted message must be consumed, its reply never posted")
	assert.Equal(t, 0, res.Replies)
}

// A signal must cut the turn off, not only what it sends: a handler that
// does not honour its context runs on past the stop or the interrupt that
// reached it, and the prover fails it (the Shell cancels it at once).
func TestASignalMustEndTheHandlerItReaches(t *testing.T) {
	for _, signal := range []EventKind{Stop, Interrupt} {
		s := &Schedule{Seed: 1, Rooms: 1, Name: "a signal in a slow turn", Events: []Event{
			{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply, Slow: 1400 * time.Millisecond}},
			{At: 6, After: 200 * time.Millisecond, Kind: signal, Room: 0},
			{At: 6, After: 900 * time.Millisecond, Kind: Play, Room: 0},
		}}
		res := Simulate(t, s, Options{})
		require.Nil(t, res.Violation, "%s: the Shell cancels the handler", signal)
		res = Simulate(t, s, Options{Agent: ShellAgent(ShellConfig{deafHandler: true}), HandlersCut: true})
		require.NotNil(t, res.Violation, "%s: a handler that ran on passed", signal)
		assert.Contains(t, res.Violation.Reason, "ran 1.2s past the "+strings.ToLower(signal.String()), signal)
	}
}

// Found by mutation testing the prover: r1m2's reply POST got a 503 and
// its cycle was held through the settle wait, where an interrupt reached
// it; then a stale /next served r1m1 (processed already), which ended the
// held cycle and forgot the interrupt, and r1m2, served again, was
// claimed afresh and its withdrawn reply posted. The interrupt now
// survives as the message's consuming mark.
func TestShellKeepsAnInterruptThroughAStaleNextInTheSettleWait(t *testing.T) {
	s := &Schedule{Seed: 1, Rooms: 1, Name: "a stale /next while an interrupted reply settles", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{Kind: Say, Spec: MessageSpec{Label: "r1m2", Outcome: Reply}},
		{At: 10, Kind: ServerError, Endpoint: fakeband.EndpointPost, Status: 503, Count: 1},
		{At: 11, After: time.Second, Kind: Interrupt, Room: 0},
		{At: 11, Kind: StaleNext, Endpoint: fakeband.EndpointNext},
	}}
	res := Simulate(t, s, Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Replies, "r1m1's reply only: r1m2's was withdrawn by the interrupt")
	assert.Equal(t, 1, res.Faults["stale_next"], "the stale /next was served")
	assert.Equal(t, 1, res.Interrupted, "r1m2 was consumed unanswered")
}

// Regression, found by the prover once every request passed the shell's
// one budget: a 429 with Retry-After paused every request, the reply of
// r3m1 (its fate decided) waited in the pause, an interrupt reached the
// shell meanwhile, and the reply was sent after it. A request now asks
// its signal gate again the moment the budget lets it start.
func TestShellWithdrawsAReplyInterruptedWhileItWaitsForTheBudget(t *testing.T) {
	s := &Schedule{Seed: 20263170, Rooms: 3, Name: "interrupt while the reply waits for the budget", Events: []Event{
		{Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m3", Outcome: Reply}},
		{Kind: Say, Room: 2, Spec: MessageSpec{Label: "r3m1", Outcome: Reply}},
		{At: 8, Kind: Throttle, Status: 429, RetryAfter: "1"},
		{At: 13, Kind: Interrupt, Room: 2},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation, "nothing may leave the shell for a cycle interrupted before it left")
}

// Regression (oracle), from seed 20270111: a stop of a room the agent has
// not joined yet stops nobody and pushes nothing, but the oracle took the
// fake's latest record, another room's stop, for its push, and judged
// the agent's answer in that room after it joined as work in a stopped
// room.
func TestOracleIgnoresAStopOfARoomTheAgentIsNotIn(t *testing.T) {
	s := &Schedule{Seed: 20270111, Rooms: 2, Name: "stop before the agent joins", Events: []Event{
		{At: 4, Kind: Stop, Room: 0},
		{At: 7, Kind: Stop, Room: 1},
		{At: 8, Kind: Join, Room: 1},
		{At: 13, Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m1", Outcome: Reply}},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Replies)
}

// The prover throttles the Shell as Band's load balancer does, for a
// spell, with and without Retry-After; the Shell answers everything once.
func TestShellRidesOutARateLimit(t *testing.T) {
	for _, retryAfter := range []string{"", "1"} {
		s := &Schedule{Seed: 12, Rooms: 2, Name: "throttled", Events: []Event{
			{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
			{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m2", Outcome: Reply}},
			{Kind: Say, Room: 1, Spec: MessageSpec{Label: "r2m1", Outcome: Reply}},
			{At: 3, Kind: RateLimit, Rate: 5, Count: 1, RetryAfter: retryAfter},
			{At: 30, Kind: RateLimit},
		}}
		res := Simulate(t, s, Options{})
		assert.Nil(t, res.Violation)
		assert.Equal(t, 3, res.Replies)
		assert.Positive(t, res.Faults["rate_limited_429"], "the throttle answered 429s")
	}
}

// Regression, CI's fresh master seed 1757146888 (its schedule 1757147105):
// a message the handler gave up on for good was marked failed, and its
// room's notice waited for an earlier life's POST to settle; the next
// delivery ran the handler again, an interrupt reached that rerun, and
// the Shell marked the message failed once more. The next delivery now
// only finishes the dead letter, and an interrupt that reaches it
// consumes the message.
func TestADeadLetterWhoseNoticeWaitedRunsNoHandlerAgain(t *testing.T) {
	r := Simulate(t, Random(1757147105, GenOptions{}), Options{})
	assert.Nil(t, r.Violation)
}
