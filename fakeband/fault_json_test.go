package fakeband_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestFaultJSONRoundTrips(t *testing.T) {
	faults := []fakeband.Fault{
		{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse},
		{Endpoint: fakeband.EndpointMe, Nth: 2, Count: 3, Kind: fakeband.FailBefore, Status: 429, RetryAfter: "7", EmptyBody: true},
		{Probability: 0.25, Kind: fakeband.Delay, Delay: 1500 * time.Millisecond},
		{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.StaleNext},
	}
	for _, f := range faults {
		data, err := json.Marshal(f)
		require.NoError(t, err)
		var back fakeband.Fault
		require.NoError(t, json.Unmarshal(data, &back), "%s", data)
		assert.Equal(t, f, back, "%s", data)
	}
	sockets := []fakeband.SocketFault{
		{Event: "agent.control", Nth: 1, Kind: fakeband.LosePush},
		{Probability: 0.5, Kind: fakeband.DelayPush, Delay: time.Second},
		{Event: "message_created", Nth: 3, Kind: fakeband.DropConnection},
		{Nth: 1, Kind: fakeband.DuplicatePush},
	}
	for _, f := range sockets {
		data, err := json.Marshal(f)
		require.NoError(t, err)
		var back fakeband.SocketFault
		require.NoError(t, json.Unmarshal(data, &back), "%s", data)
		assert.Equal(t, f, back, "%s", data)
	}
}

func TestFaultJSONIsWhatAPersonTypes(t *testing.T) {
	var f fakeband.Fault
	require.NoError(t, json.Unmarshal([]byte(`{"endpoint": "processed", "kind": "delay", "nth": 2, "delay": "1m"}`), &f))
	assert.Equal(t, fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Kind: fakeband.Delay, Nth: 2, Delay: time.Minute}, f)

	data, err := json.Marshal(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
	require.NoError(t, err)
	assert.JSONEq(t, `{"endpoint": "post", "nth": 1, "kind": "lose_response"}`, string(data))
}

func TestFaultJSONRefusesWhatCannotWork(t *testing.T) {
	for name, doc := range map[string]string{
		"no kind":                       `{"endpoint": "post", "nth": 1}`,
		"unknown kind":                  `{"kind": "explode", "nth": 1}`,
		"socket kind on a request":      `{"kind": "lose_push", "nth": 1}`,
		"unknown endpoint":              `{"endpoint": "posts", "kind": "lose_response", "nth": 1}`,
		"unknown field (a typo)":        `{"kind": "lose_response", "nht": 1}`,
		"neither nth nor probability":   `{"kind": "lose_response"}`,
		"both nth and probability":      `{"kind": "lose_response", "nth": 1, "probability": 0.5}`,
		"negative nth":                  `{"kind": "lose_response", "nth": -1}`,
		"probability over 1":            `{"kind": "lose_response", "probability": 1.5}`,
		"count without nth":             `{"kind": "lose_response", "probability": 0.5, "count": 2}`,
		"negative count":                `{"kind": "lose_response", "nth": 1, "count": -2}`,
		"status not an error":           `{"kind": "fail_before", "nth": 1, "status": 200}`,
		"delay without a delay":         `{"kind": "delay", "nth": 1}`,
		"delay not a duration":          `{"kind": "delay", "nth": 1, "delay": "soon"}`,
		"negative delay":                `{"kind": "delay", "nth": 1, "delay": "-1s"}`,
		"stale_next off next":           `{"endpoint": "post", "kind": "stale_next", "nth": 1}`,
		"loop_cursor off context":       `{"endpoint": "next", "kind": "loop_cursor", "nth": 1}`,
		"not an object":                 `[1]`,
		"kind of the wrong type":        `{"kind": 1, "nth": 1}`,
		"stale_next on any endpoint":    `{"kind": "stale_next", "nth": 1}`,
		"fail_before, informational":    `{"kind": "fail_before", "nth": 1, "status": 101}`,
		"count with probability":        `{"kind": "fail_before", "probability": 0.1, "count": 1}`,
		"retry_after of the wrong type": `{"kind": "fail_before", "nth": 1, "retry_after": 7}`,
	} {
		var f fakeband.Fault
		err := json.Unmarshal([]byte(doc), &f)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, fakeband.ErrBadFault, "%s: %v", name, err)
	}
	for name, doc := range map[string]string{
		"no kind":                   `{"event": "agent.control", "nth": 1}`,
		"request kind on a socket":  `{"kind": "lose_response", "nth": 1}`,
		"delay_push without delay":  `{"kind": "delay_push", "nth": 1}`,
		"neither nth nor chance":    `{"kind": "lose_push"}`,
		"unknown field":             `{"kind": "lose_push", "nth": 1, "endpoint": "post"}`,
		"probability below 0":       `{"kind": "lose_push", "probability": -0.1}`,
		"delay not a Go duration":   `{"kind": "delay_push", "nth": 1, "delay": "1 second"}`,
		"both nth and probability.": `{"kind": "lose_push", "nth": 1, "probability": 0.1}`,
	} {
		var f fakeband.SocketFault
		err := json.Unmarshal([]byte(doc), &f)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, fakeband.ErrBadFault, "%s: %v", name, err)
	}
}

func TestFaultKindsHaveTextForms(t *testing.T) {
	for _, k := range []fakeband.FaultKind{fakeband.FailBefore, fakeband.LoseResponse, fakeband.Delay, fakeband.StaleNext, fakeband.LoopCursor} {
		text, err := k.MarshalText()
		require.NoError(t, err)
		var back fakeband.FaultKind
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, k, back)
	}
	_, err := fakeband.FaultKind(99).MarshalText()
	assert.ErrorIs(t, err, fakeband.ErrBadFault)
	_, err = fakeband.SocketFaultKind(99).MarshalText()
	assert.ErrorIs(t, err, fakeband.ErrBadFault)
}

func TestInjectPlanAddsAllOrNothing(t *testing.T) {
	f := newFixture(t)
	bad := fakeband.FaultPlan{
		Request: []fakeband.Fault{{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.FailBefore}},
		Socket:  []fakeband.SocketFault{{Kind: fakeband.LosePush}}, // never fires: refused
	}
	err := f.b.InjectPlan(bad)
	require.ErrorIs(t, err, fakeband.ErrBadFault)
	assert.Contains(t, err.Error(), "socket[0]")
	assert.Equal(t, 200, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status, "the valid rule was not added either")

	require.NoError(t, f.b.InjectPlan(fakeband.FaultPlan{Request: []fakeband.Fault{
		{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.FailBefore, Status: 500},
		{Endpoint: fakeband.EndpointMe, Nth: 2, Kind: fakeband.FailBefore, Status: 502},
	}}))
	assert.Equal(t, 500, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	assert.Equal(t, 502, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	assert.Equal(t, 200, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
}
