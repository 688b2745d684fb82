package proof

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestSpecRoundTripsThroughItsText(t *testing.T) {
	for _, s := range []MessageSpec{
		{Label: "r1m1", Outcome: Reply},
		{Label: "r2m3", Outcome: Reply, Fails: 2, Slow: 250 * time.Millisecond, Key: "nk:r2:a"},
		{Label: "r3m1", Outcome: PanicThenReply, Fails: 1},
		{Label: "r1m2", Outcome: PermanentFailure},
		{Label: "r1m4", Outcome: AlwaysFail},
		{Label: "r1m5", Outcome: NoReply},
	} {
		got, err := ParseSpec(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	for _, bad := range []string{"", "r1m1", "r1m1 explode", "r1m1 reply fails=x", "r1m1 reply color=red"} {
		_, err := ParseSpec(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestRandomSchedulesAreSeededAndWithinTheirShape(t *testing.T) {
	assert.Equal(t, Random(99, GenOptions{}), Random(99, GenOptions{}))
	assert.NotEqual(t, Random(99, GenOptions{}).Events, Random(100, GenOptions{}).Events)
	durable, faults := 0, 0
	for seed := int64(0); seed < 300; seed++ {
		s := Random(seed, GenOptions{})
		require.GreaterOrEqual(t, s.Rooms, 1)
		require.LessOrEqual(t, s.Rooms, 3)
		perRoom := map[int]int{}
		last := 0
		for _, e := range s.Events {
			require.GreaterOrEqual(t, e.At, last, "events are in At order")
			last = e.At
			if e.Kind == Say {
				perRoom[e.Room]++
				require.Less(t, e.Spec.Fails, 3, "a drawn failure count stays under the budget")
			} else {
				faults++
			}
		}
		for room := range s.Rooms {
			require.GreaterOrEqual(t, perRoom[room], 1)
			require.LessOrEqual(t, perRoom[room], 5)
		}
		if s.Durable {
			durable++
		}
	}
	assert.InDelta(t, 90, durable, 40, "about 30%% of schedules are durable")
	assert.Positive(t, faults)
}

func TestEventsDescribeThemselves(t *testing.T) {
	assert.Equal(t, "before start: human says r1m1 reply in room 1", Event{Kind: Say, Spec: MessageSpec{Label: "r1m1"}}.String())
	assert.Equal(t, "@req 7: kill the agent before the next post request is sent",
		Event{At: 7, Kind: KillBefore, Endpoint: fakeband.EndpointPost}.String())
	assert.Equal(t, "@req 3 (or 1s after req 2): interrupt every room (push late by 10ms)",
		Event{At: 3, After: time.Second, Kind: Interrupt, Room: -1, Push: PushLate, Delay: 10 * time.Millisecond}.String())
}
