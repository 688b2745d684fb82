package fakeband_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestFailBeforeFiresOnTheNthRequestsAndAppliesNothing(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 2, Count: 2, Kind: fakeband.FailBefore, Status: 500})

	var statuses []int
	for range 4 {
		statuses = append(statuses, f.mark(t, msg, "processing", nil).status)
	}
	assert.Equal(t, []int{200, 500, 500, 200}, statuses)
	marks := f.b.Marks(f.bot.ID, msg)
	require.Len(t, marks, 2, "the failed requests applied nothing")
	assert.Equal(t, 2, marks[1].Attempt)
	assert.Equal(t, 4, f.b.Requests()[fakeband.EndpointProcessing], "faulted requests are counted")
	assert.Equal(t, map[string]int{"processing/fail_before": 2}, f.b.FaultsFired())
}

func TestFailBeforeBodies(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.FailBefore, Status: 429, RetryAfter: "7", EmptyBody: true})
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 2, Kind: fakeband.FailBefore})

	alb := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil)
	assert.Equal(t, 429, alb.status)
	assert.Empty(t, alb.raw)
	assert.Equal(t, "7", alb.header.Get("Retry-After"))

	def := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil)
	assert.Equal(t, 503, def.status, "Status 0 means 503")
	assert.Equal(t, "service_unavailable", def.errorCode(t))
	assert.Empty(t, def.header.Get("Retry-After"))
}

func TestFailBeforeComesBeforeAuthentication(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.FailBefore, Status: 502})
	resp := f.do(t, http.MethodGet, "/agent/me", "bad key", nil)
	assert.Equal(t, 502, resp.status)
	assert.Equal(t, "bad_gateway", resp.errorCode(t))
}

func TestLoseResponseAppliesThenFailsTheRequest(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
	_, err := f.try(http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi", map[string]any{"id": f.alice.ID}))
	require.ErrorIs(t, err, fakeband.ErrResponseLost)
	posts := f.b.Posts(f.room.ID)
	require.Len(t, posts, 1, "the post was applied")
	assert.Equal(t, f.bot.ID, posts[0].SenderID)
	assert.Equal(t, map[string]int{"post/lose_response": 1}, f.b.FaultsFired())

	resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("again", map[string]any{"id": f.alice.ID}))
	assert.Equal(t, http.StatusCreated, resp.status, "only the first one is lost")
	assert.Len(t, f.b.Posts(f.room.ID), 2, "no idempotency: a retried post is a second message")
}

func TestLoseResponseOnAMarkStillMarks(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	f.mark(t, msg, "processing", nil)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Kind: fakeband.LoseResponse})
	_, err := f.try(http.MethodPost, f.chat("/messages/"+msg+"/processed"), f.bot.Key, nil)
	require.ErrorIs(t, err, fakeband.ErrResponseLost)
	assert.Equal(t, "processed", f.b.Status(f.bot.ID, msg))
	retry := f.mark(t, msg, "processed", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, retry.status, "the retry of a lost processed ack is a 422")
}

func TestDelayServesAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
		var resp response
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, _ = f.try(http.MethodGet, "/agent/me", f.bot.Key, nil)
		}()
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("answered before the delay ran out")
		default:
		}
		time.Sleep(time.Nanosecond)
		<-done
		assert.Equal(t, http.StatusOK, resp.status)
		assert.Equal(t, map[string]int{"me/delay": 1}, f.b.FaultsFired())
	})
}

func TestDelayRespectsTheRequestContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		body := strings.NewReader(`{"message":{"content":"hi","mentions":[{"id":"` + f.alice.ID + `"}]}}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.b.BaseURL()+f.chat("/messages"), body)
		require.NoError(t, err)
		req.Header.Set("X-API-Key", f.bot.Key)
		_, err = f.c.Do(req)
		require.Error(t, err)
		synctest.Wait()
		assert.Empty(t, f.b.Posts(f.room.ID), "a request abandoned during its delay is not applied")
		assert.Equal(t, http.StatusCreated, f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi", map[string]any{"id": f.alice.ID})).status,
			"the same body is accepted without the delay")
	})
}

// A server keeps working on a request its client gave up on: ApplyLate
// applies the POST after the client's own timeout ended its wait.
func TestApplyLateAppliesARequestItsClientGaveUpOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: 10 * time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		body := strings.NewReader(`{"message":{"content":"hi","mentions":[{"id":"` + f.alice.ID + `"}]}}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.b.BaseURL()+f.chat("/messages"), body)
		require.NoError(t, err)
		req.Header.Set("X-API-Key", f.bot.Key)
		_, err = f.c.Do(req)
		require.Error(t, err, "the client gave up after its timeout")
		synctest.Wait()
		assert.Empty(t, f.b.Posts(f.room.ID), "held: not applied yet")
		assert.Equal(t, map[string]int{"post/apply_late": 1}, f.b.FaultsFired())

		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Len(t, f.b.Posts(f.room.ID), 1, "applied once the hold ended, though nobody waits for the answer")
		assert.Equal(t, map[string]int{"post/apply_late": 1, "post/applied_late": 1}, f.b.FaultsFired())
	})
}

// Close cuts a hold short, and the held request is never applied.
func TestCloseEndsAnApplyLateHoldWithoutApplyingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{})
		bot, alice := b.AddAgent("Bot"), b.AddHuman("Alice")
		room := b.AddRoom("r", alice, bot.ID)
		b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: time.Hour})
		var wg sync.WaitGroup
		wg.Go(func() {
			body := strings.NewReader(`{"message":{"content":"hi","mentions":[]}}`)
			req, _ := http.NewRequest(http.MethodPost, b.BaseURL()+"/agent/chats/"+room.ID+"/messages", body)
			req.Header.Set("X-API-Key", bot.Key)
			if resp, err := b.HTTPClient().Do(req); err == nil {
				resp.Body.Close()
			}
		})
		synctest.Wait()
		require.NoError(t, b.Close())
		wg.Wait()
		assert.Empty(t, b.Posts(room.ID))
	})
}

func TestCloseEndsADelayedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{})
		bot := b.AddAgent("Bot")
		b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
		var wg sync.WaitGroup
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, b.BaseURL()+"/agent/me", nil)
			req.Header.Set("X-API-Key", bot.Key)
			if resp, err := b.HTTPClient().Do(req); err == nil {
				resp.Body.Close()
			}
		})
		synctest.Wait()
		require.NoError(t, b.Close())
		wg.Wait()
	})
}

func TestStaleNextServesTheLastProcessedMessageOnce(t *testing.T) {
	f := newFixture(t)
	next := func() response { return f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil) }
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.StaleNext})
	assert.Equal(t, http.StatusNoContent, next().status, "nothing processed yet: served normally")
	assert.Empty(t, f.b.FaultsFired())

	done := f.say(t, "one")
	pending := f.say(t, "two")
	f.mark(t, done, "processing", nil)
	f.mark(t, done, "processed", nil)
	f.b.ClearFaults()
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.StaleNext})
	assert.Equal(t, done, next().data(t)["id"], "the stale replica serves the processed message")
	assert.Equal(t, pending, next().data(t)["id"])
	assert.Equal(t, map[string]int{"next/stale_next": 1}, f.b.FaultsFired())
	assert.Equal(t, http.StatusUnprocessableEntity, f.mark(t, done, "processing", nil).status,
		"acting on the stale serve is refused")
}

func TestEmptyEndpointMatchesAgentEndpointsOnly(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Nth: 1, Count: 100, Kind: fakeband.FailBefore, Status: 500})
	assert.Equal(t, 500, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	assert.Equal(t, 500, f.do(t, http.MethodGet, "/agent/chats", f.bot.Key, nil).status)
	human := f.do(t, http.MethodPost, "/me/chats/"+f.room.ID+"/messages", f.alice.Key, post("hi", map[string]any{"id": f.bot.ID}))
	assert.Equal(t, http.StatusCreated, human.status)
	assert.Equal(t, map[string]int{"me/fail_before": 1, "chats/fail_before": 1}, f.b.FaultsFired())
}

func TestFirstFiringRuleAppliesAndEveryRuleCounts(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Kind: fakeband.FailBefore, Status: 500})
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Count: 2, Kind: fakeband.FailBefore, Status: 429})
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointNext, Nth: 1, Kind: fakeband.FailBefore, Status: 502})
	var got []int
	for range 3 {
		got = append(got, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	}
	assert.Equal(t, []int{500, 429, 200}, got, "the second rule counted the first request too")
	assert.Equal(t, 502, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).status)

	f.b.ClearFaults()
	assert.Equal(t, 200, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
	assert.Equal(t, map[string]int{"me/fail_before": 2, "next/fail_before": 1}, f.b.FaultsFired(), "the histogram survives ClearFaults")
}

// pattern returns which of n GET /agent/me failed under a 50% fault.
func pattern(t *testing.T, seed int64, n int) []bool {
	t.Helper()
	b := fakeband.New(fakeband.Options{Seed: seed})
	defer b.Close()
	f := &fixture{b: b, c: b.HTTPClient(), bot: b.AddAgent("Bot")}
	b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Probability: 0.5, Kind: fakeband.FailBefore})
	out := make([]bool, n)
	for i := range out {
		out[i] = f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status == 503
	}
	return out
}

func TestProbabilityIsSeededAndReproducible(t *testing.T) {
	a, b, c := pattern(t, 42, 64), pattern(t, 42, 64), pattern(t, 43, 64)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	fired := 0
	for _, x := range a {
		if x {
			fired++
		}
	}
	assert.Greater(t, fired, 10)
	assert.Less(t, fired, 54)
}

func TestProbabilityBounds(t *testing.T) {
	f := newFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Probability: 0, Kind: fakeband.FailBefore})
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointChats, Probability: 1, Kind: fakeband.FailBefore})
	for range 20 {
		require.Equal(t, 200, f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).status)
		require.Equal(t, 503, f.do(t, http.MethodGet, "/agent/chats", f.bot.Key, nil).status)
	}
}

func TestFaultKindNames(t *testing.T) {
	assert.Equal(t, "fail_before", fakeband.FailBefore.String())
	assert.Equal(t, "lose_response", fakeband.LoseResponse.String())
	assert.Equal(t, "delay", fakeband.Delay.String())
	assert.Equal(t, "stale_next", fakeband.StaleNext.String())
	assert.Equal(t, "FaultKind(9)", fakeband.FaultKind(9).String())
}

func TestLoopCursorPointsAContextPageBackAtItself(t *testing.T) {
	f := newFixture(t)
	f.say(t, "one")
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointContext, Probability: 1, Kind: fakeband.LoopCursor})
	first := f.do(t, http.MethodGet, f.chat("/context"), f.bot.Key, nil).body(t)["metadata"].(map[string]any)
	assert.Equal(t, true, first["has_more"])
	cursor := first["next_cursor"].(string)
	again := f.do(t, http.MethodGet, f.chat("/context?cursor="+cursor), f.bot.Key, nil).body(t)["metadata"].(map[string]any)
	assert.Equal(t, cursor, again["next_cursor"], "the page points at itself")
	assert.Equal(t, map[string]int{"context/loop_cursor": 2}, f.b.FaultsFired())
	assert.Equal(t, "loop_cursor", fakeband.LoopCursor.String())
}

// A rule "fail from the 2nd request on, a huge number of times" must
// fire on the 2nd request: Nth+Count overflows int in fires, so the rule
// the admin API accepted (the console's "Times" field sends it) never
// fires at all, while validateFault refuses rules that can never fire.
func TestAFaultWithAHugeCountStillFires(t *testing.T) {
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	bot := b.AddAgent("Bot")
	require.NoError(t, b.InjectPlan(fakeband.FaultPlan{Request: []fakeband.Fault{
		{Endpoint: fakeband.EndpointMe, Kind: fakeband.FailBefore, Nth: 2, Count: math.MaxInt},
	}}))
	codes := []int{}
	for range 3 {
		codes = append(codes, serveOnce(t, b, http.MethodGet, "/api/v1/agent/me", bot.Key, "").Code)
	}
	require.Equal(t, []int{200, 503, 503}, codes)
}
