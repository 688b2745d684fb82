package proof

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func oneMessage(events ...Event) *Schedule {
	s := &Schedule{Seed: 3, Rooms: 1, Events: []Event{{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}}}}
	s.Events = append(s.Events, events...)
	return s
}

func TestAKillBeforeSendKeepsTheRequestFromTheFake(t *testing.T) {
	res := Simulate(t, oneMessage(Event{At: 1, Kind: KillBefore, Endpoint: fakeband.EndpointPost}), Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 2, res.Lives, "the kill started a second life")
	assert.Equal(t, 1, res.Faults["kill_before_send"])
	assert.Equal(t, 1, res.Replies, "only the second life's post reached the fake")
}

func TestAKillAfterApplyLandsTheRequestAndTheNextLifeFindsIt(t *testing.T) {
	res := Simulate(t, oneMessage(Event{At: 1, Kind: KillAfter, Endpoint: fakeband.EndpointPost}), Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 2, res.Lives)
	assert.Equal(t, 1, res.Faults["kill_after_apply"])
	assert.Equal(t, 1, res.Replies, "the first life's post landed; the second life's guard found it")
}

func TestALostAckIsRetriedWithoutASecondReply(t *testing.T) {
	res := Simulate(t, oneMessage(Event{At: 1, Kind: LoseResponse, Endpoint: fakeband.EndpointProcessed}), Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Faults["lost_response"])
	assert.Equal(t, 1, res.Replies)
	assert.Equal(t, 1, res.Lives)
}

func TestAStopDeliveredMidCycleIsHonouredAndPlayedAtTheEnd(t *testing.T) {
	// Gate indices: 1 me, 2 chats, 3 next, 4 socket, 5 processing. The
	// stop lands while the message is being claimed, and no play follows.
	res := Simulate(t, oneMessage(Event{At: 5, Kind: Stop, Room: 0}), Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Faults["stop"])
	assert.Equal(t, 1, res.Faults["final_play"], "the engine plays a room left stopped so the schedule can end")
	assert.Equal(t, 1, res.Checks[StopSilence], "the delivered stop was judged")
	assert.Equal(t, 1, res.Replies, "answered after the play")
}

func TestAnAgentThatReturnsOnItsOwnIsAViolation(t *testing.T) {
	quitter := func(*Schedule) (Factory, func()) {
		return func() Agent { return func(context.Context, Env) error { return nil } }, nil
	}
	res := Simulate(t, oneMessage(), Options{Agent: quitter})
	require.NotNil(t, res.Violation)
	assert.Equal(t, NonePending, res.Violation.Invariant, "its message is left behind")
	assert.Equal(t, 1, res.Violations[AgentLifecycle])
}

func TestAnAgentThatIgnoresItsContextIsAViolation(t *testing.T) {
	stubborn := func(*Schedule) (Factory, func()) {
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				<-ctx.Done()
				time.Sleep(2 * killGrace) // virtual time; it does end, late
				return nil
			}
		}, nil
	}
	res := Simulate(t, &Schedule{Seed: 1, Rooms: 1}, Options{Agent: stubborn})
	require.NotNil(t, res.Violation)
	assert.Equal(t, AgentLifecycle, res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "kept running")
}

func TestExternalRefusesEffectsOfAKilledLife(t *testing.T) {
	w := newExternalWorld(func() int { return 7 }, &orderClock{})
	first, second := w.forLife(1), w.forLife(2)
	n, err := first.Effect("charge:42")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	first.dead.Store(true)
	_, err = first.Effect("charge:42")
	assert.ErrorIs(t, err, ErrLifeEnded)
	_, err = first.Started("room", "m")
	assert.ErrorIs(t, err, ErrLifeEnded)
	n, err = second.Effect("charge:42")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "effects survive the kill")
	assert.Equal(t, 2, second.Count("charge:42"))
	k, err := second.Started("room", "m")
	require.NoError(t, err)
	assert.Equal(t, 1, k)
	starts, _ := w.snapshot()
	assert.Equal(t, []HandlerStart{{Life: 2, Room: "room", MessageID: "m", Seq: 7, Tick: 1}}, starts)
}

func TestCustomChecksSeeEffectsAndJoinTheVerdict(t *testing.T) {
	once := CustomCheck{Name: "effect-once", Judge: func(r Result) string {
		for key, n := range r.Effects {
			if n > 1 {
				return key + " performed twice"
			}
		}
		return ""
	}}
	// The prover's handler records a failure as an effect; a message
	// drawn to fail twice performs "failures:<id>" twice.
	s := &Schedule{Seed: 3, Rooms: 1, Events: []Event{{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply, Fails: 2}}}}
	res := Simulate(t, s, Options{Checks: []CustomCheck{once}})
	require.NotNil(t, res.Violation)
	assert.Equal(t, Invariant("effect-once"), res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "performed twice")
	assert.Equal(t, 1, res.Checks["effect-once"])
	assert.Len(t, res.Starts, 3, "two failed starts, then the reply")

	res = Simulate(t, oneMessage(), Options{Checks: []CustomCheck{once}})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Checks["effect-once"])
}

func TestASupersededAgentStopsAndIsStartedAgain(t *testing.T) {
	// Gate indices: 1 me, 2 chats, 3 socket, 4 next, 5 processing.
	res := Simulate(t, oneMessage(Event{At: 5, Kind: Supersede}), Options{})
	require.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Faults["supersede"])
	assert.Equal(t, 2, res.Lives)
	assert.Equal(t, 1, res.Replies)
}

func TestRepliesOptionalAcceptsASilentConsumeButNothingElse(t *testing.T) {
	silent := func(*Schedule) (Factory, func()) {
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				a := &loopAgent{api: &restClient{hc: env.HTTPClient, base: env.BaseURL, key: env.APIKey}, env: env,
					abort: map[string]string{}, active: map[string]bool{}, ackPending: map[string]bool{}}
				return a.consumeSilently(ctx)
			}
		}, nil
	}
	res := Simulate(t, oneMessage(), Options{Agent: silent})
	require.NotNil(t, res.Violation)
	assert.Equal(t, OneOutcome, res.Violation.Invariant)
	assert.Contains(t, res.Found[OneOutcome].Reason, "without its reply")

	res = Simulate(t, oneMessage(), Options{Agent: silent, RepliesOptional: true})
	assert.Nil(t, res.Violation)
	assert.Empty(t, res.Found)
}

// A processed mark applied with its answer lost closes the turn, as Band
// sees it: the faults aimed at POSTs that will not come (its room is done,
// the other one stopped) fire at the stall, not after two minutes each,
// which once took this schedule past its deadline.
func TestAMarkWhoseAnswerWasLostClosesTheTurn(t *testing.T) {
	ev := []Event{
		{Kind: Say, Room: 0, Spec: MessageSpec{Label: "r1m1"}},
		{At: 1, Kind: LoseResponse, Endpoint: fakeband.EndpointProcessed},
		{At: 1, After: 5 * time.Second, Kind: Stop, Room: 1},
	}
	for range 8 {
		ev = append(ev, Event{At: 1, Kind: Throttle, Endpoint: fakeband.EndpointPost})
	}
	ev = append(ev, Event{At: 1, Kind: Play, Room: 1})
	r := Simulate(t, &Schedule{Seed: 7, Name: "lost mark answer", Rooms: 2, Events: ev}, Options{})
	assert.Nil(t, r.Violation)
	assert.Positive(t, r.Faults["lost_response"], "the mark's answer was lost")
}
