package proof

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A reply POST the fake applied and the agent was answered 502 for: the
// Shell reads the room again before any retry and finds it, so it is
// posted once. A loop that re-sends after a 5xx posts it twice.
func TestAPostAppliedThenAnswered5xx(t *testing.T) {
	s := &Schedule{Seed: 3, Rooms: 1, Name: "applied then 502", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{At: 1, Kind: AppliedThen5xx, Endpoint: fakeband.EndpointPost, Status: http.StatusBadGateway},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Replies)
	assert.Equal(t, 1, res.Faults["applied_then_5xx"])

	res = Simulate(t, s, Options{Agent: restAgent(defects{resendOn5xx: true})})
	require.NotNil(t, res.Violation)
	assert.Equal(t, NoDoublePost, res.Violation.Invariant)
}

// A reply POST the fake applied at once and answered after the client's
// timeout: the Shell gave up on it, reads the room, finds it and posts no
// second reply. A loop that re-sends without reading posts it twice.
func TestAPostAnsweredAfterTheClientGaveUp(t *testing.T) {
	s := &Schedule{Seed: 4, Rooms: 1, Name: "answered after give-up", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{At: 1, Kind: AnswerAfterGiveUp, Endpoint: fakeband.EndpointPost, Delay: 5 * time.Second},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Replies)
	assert.Equal(t, 1, res.Faults["applied_answered_after_give_up"])

	res = Simulate(t, s, Options{Agent: restAgent(defects{blindResend: true})})
	require.NotNil(t, res.Violation)
	assert.Equal(t, NoDoublePost, res.Violation.Invariant)
}

// Look-alike messages: two humans say "ok" at the same instant, and a
// third pastes the first message's dedup marker as its last line. The
// Shell answers all three, each once.
func TestLookAlikeMessagesAreAnsweredApart(t *testing.T) {
	s := &Schedule{Seed: 5, Rooms: 1, Name: "look-alikes", Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{Kind: Say, Spec: MessageSpec{Label: "r1m2", Outcome: Reply, Text: "ok"}},
		{Kind: Say, Spec: MessageSpec{Label: "r1m3", Outcome: Reply, Text: "ok"}},
		{Kind: Say, Spec: MessageSpec{Label: "r1m4", Outcome: Reply, Quotes: "r1m1"}},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 4, res.Replies)
	assert.Equal(t, 1, res.Faults["human_same_text"])
	assert.Equal(t, 3, res.Faults["human_same_second"], "said at one instant")
	assert.Equal(t, 1, res.Faults["human_quotes_marker"])
	require.Len(t, res.Said, 4)
	assert.Equal(t, "r1m3", res.Said[2].Label, "a plain line keeps its label")
}

// The quoted marker is the quoted message's key, on the last line of
// what the human wrote; the spec before it still reads.
func TestAQuotedMarkerCarriesTheQuotedMessagesKey(t *testing.T) {
	s := &Schedule{Seed: 6, Rooms: 1, Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{Kind: Say, Spec: MessageSpec{Label: "r1m2", Outcome: Reply, Quotes: "r1m1"}},
	}}
	var contents []string
	reader := func(*Schedule) (Factory, func()) {
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				api := &restClient{hc: env.HTTPClient, base: env.BaseURL, key: env.APIKey}
				rooms, err := api.rooms(ctx)
				if err == nil && len(rooms) == 1 && contents == nil {
					var out struct{ Data []wireMessage }
					if _, err := api.do(ctx, http.MethodGet, "/agent/chats/"+rooms[0]+"/context", nil, &out); err == nil {
						for _, m := range out.Data {
							contents = append(contents, bandonce.StripMentions(m.Content))
						}
					}
				}
				<-ctx.Done()
				return nil
			}
		}, nil
	}
	res := Simulate(t, s, Options{Agent: reader, RepliesOptional: true})
	require.Len(t, res.Said, 2)
	require.Len(t, contents, 2)
	assert.Equal(t, "r1m2 reply\n[dedup_key:"+bandonce.DefaultKey(res.Said[0].ID)+"]", contents[1])
	spec, err := ParseSpec(contents[1])
	require.NoError(t, err, "a pasted line after the spec is not part of it")
	assert.Equal(t, "r1m2", spec.Label)
}

// An agent that polls without ever waiting on a timer never lets virtual
// time advance; the engine says so instead of hanging.
func TestABusyLoopIsCaught(t *testing.T) {
	busy := func(*Schedule) (Factory, func()) {
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.BaseURL+"/agent/chats", nil)
					req.Header.Set("X-API-Key", env.APIKey)
					if resp, err := env.HTTPClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
				return nil
			}
		}, nil
	}
	res := Simulate(t, &Schedule{Seed: 1, Rooms: 1, Events: []Event{{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}}}}, Options{Agent: busy})
	require.NotNil(t, res.Violation)
	assert.Equal(t, AgentLifecycle, res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "never lets virtual time advance")
}

// The wall-clock watchdog names the defect when the driver cannot take a
// step at all.
func TestTheWallClockWatchdogNamesASpinningAgent(t *testing.T) {
	var steps atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	defer func() {
		v := recover()
		require.NotNil(t, v)
		assert.Contains(t, v, "spins without ever blocking")
	}()
	watchSteps("spinner", &steps, stop, 40*time.Millisecond, io.Discard)
}

// The Shell stops when superseded and starts nothing more; an agent that
// hears the supersede and idles on is caught once the grace is over, even
// with nothing left to do.
func TestSupersedeIsJudgedFromItsArrival(t *testing.T) {
	s := &Schedule{Seed: 7, Rooms: 1, Events: []Event{
		{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: Reply}},
		{At: 6, Kind: Supersede},
	}}
	res := Simulate(t, s, Options{})
	assert.Nil(t, res.Violation)
	assert.Equal(t, 1, res.Checks[SupersedeStops])
	reached := false
	for _, sig := range res.Signals {
		reached = reached || (sig.Kind == Supersede && sig.Reached)
	}
	assert.True(t, reached)

	res = Simulate(t, s, Options{Agent: restAgent(defects{ignoreSupersede: true})})
	require.NotNil(t, res.Violation)
	assert.Equal(t, SupersedeStops, res.Violation.Invariant)
	assert.True(t, strings.Contains(res.Violation.Reason, "kept working") || strings.Contains(res.Violation.Reason, "kept running"), res.Violation.Reason)
}
