package fakeband_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// Each agent has its own bucket: a burst passes, the next call is a 429
// with Retry-After, and the bucket refills with time.
func TestRateLimitThrottlesEachAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		other := f.b.AddAgent("Other")
		require.NoError(t, f.b.SetRateLimit(&fakeband.RateLimit{PerSecond: 0.5, Burst: 2, RetryAfter: true}))
		me := func(key string) response { return f.do(t, http.MethodGet, "/agent/me", key, nil) }

		assert.Equal(t, 200, me(f.bot.Key).status)
		assert.Equal(t, 200, me(f.bot.Key).status)
		throttled := me(f.bot.Key)
		require.Equal(t, http.StatusTooManyRequests, throttled.status)
		assert.Equal(t, "2", throttled.header.Get("Retry-After"), "one token at 0.5 per second is 2 s away")
		assert.Equal(t, "too_many_requests", throttled.errorCode(t))
		assert.Equal(t, 200, me(other.Key).status, "another agent has its own bucket")

		time.Sleep(2 * time.Second)
		assert.Equal(t, 200, me(f.bot.Key).status, "refilled")
		assert.Equal(t, 429, me(f.bot.Key).status)
		assert.Equal(t, 2, f.b.FaultsFired()["me/rate_limit"])
		assert.Equal(t, 6, f.b.Requests()[fakeband.EndpointMe], "throttled calls are counted")

		// Keys the fake does not know share one bucket, so a stream of
		// made-up keys costs one bucket, not one each.
		assert.Equal(t, 401, me("bogus-1").status)
		assert.Equal(t, 401, me("bogus-2").status)
		assert.Equal(t, 429, me("bogus-3").status, "the unknown keys' one bucket is empty")
		assert.Equal(t, 200, me(other.Key).status, "an agent's bucket is not theirs")

		f.b.ClearFaults()
		assert.Equal(t, 200, me(f.bot.Key).status, "ClearFaults lifts the limit")
	})
}

// Like the load balancer: no body and no Retry-After; nothing applied.
func TestRateLimitLikeTheLoadBalancer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{Seed: 1, RateLimit: &fakeband.RateLimit{PerSecond: 1, EmptyBody: true}})
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		f := &fixture{b: b, c: b.HTTPClient(), alice: b.AddHuman("Alice"), bot: b.AddAgent("Bot")}
		f.room = b.AddRoom("general", f.alice, f.bot.ID)
		hi := post("hi", map[string]any{"id": f.alice.ID})
		assert.Equal(t, 201, f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, hi).status)
		r := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, hi)
		assert.Equal(t, 429, r.status)
		assert.Empty(t, r.raw)
		assert.Empty(t, r.header.Get("Retry-After"))
		assert.Len(t, b.Posts(f.room.ID), 1, "a throttled post applies nothing")
	})
}

// The rate limit travels in a fault plan, a scenario and the admin API,
// and bad values are refused.
func TestRateLimitInPlansScenariosAndTheAdminAPI(t *testing.T) {
	var plan fakeband.FaultPlan
	require.NoError(t, json.Unmarshal([]byte(`{"rate_limit": {"per_second": 5, "burst": 10, "retry_after": true}}`), &plan))
	assert.Equal(t, &fakeband.RateLimit{PerSecond: 5, Burst: 10, RetryAfter: true}, plan.RateLimit)
	f := newAdminFixture(t)
	require.NoError(t, f.b.InjectPlan(plan))
	_, faults := f.admin(t, http.MethodGet, "/faults", nil)
	assert.Equal(t, map[string]any{"per_second": 5.0, "burst": 10.0, "retry_after": true}, faults["rate_limit"])

	status, bad := f.admin(t, http.MethodPost, "/faults", map[string]any{"rate_limit": map[string]any{"per_second": 0}})
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	assert.Contains(t, bad["message"], "per_second")
	status, _ = f.admin(t, http.MethodDelete, "/faults", nil)
	require.Equal(t, http.StatusOK, status)
	_, faults = f.admin(t, http.MethodGet, "/faults", nil)
	assert.Nil(t, faults["rate_limit"])

	_, err := fakeband.ParseScenario([]byte(`{"agents": [{"name": "a"}], "faults": {"rate_limit": {"per_second": -1}}}`))
	assert.ErrorContains(t, err, "faults.rate_limit: rate_limit.per_second -1 is not a positive number")
	_, err = fakeband.ParseScenario([]byte(`{"agents": [{"name": "a"}], "faults": {"rate_limit": {"per_second": 1, "brust": 2}}}`))
	assert.ErrorContains(t, err, "brust", "a typo is refused")
	scn, err := fakeband.ParseScenario([]byte(`{"agents": [{"name": "a"}], "faults": {"rate_limit": {"per_second": 2}}}`))
	require.NoError(t, err)
	assert.Equal(t, &fakeband.RateLimit{PerSecond: 2}, scn.Faults.RateLimit)
	assert.Error(t, f.b.SetRateLimit(&fakeband.RateLimit{PerSecond: 1, Burst: -1}))
	// Slower than a call a day, the Retry-After would be past any clock.
	assert.ErrorContains(t, f.b.SetRateLimit(&fakeband.RateLimit{PerSecond: 1e-300, RetryAfter: true}), "below one call a day")
}
