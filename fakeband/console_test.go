package fakeband_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// get fetches a path of the Band in memory with extra headers.
func get(t *testing.T, c *http.Client, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+fakeband.Host+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(raw)
}

// The console is served at / and /console with the admin API, from the
// embedded files, under a policy that lets it load nothing from elsewhere,
// and behind the admin API's guard; without the admin API there is none.
func TestTheConsoleIsServedWithTheAdminAPIOnly(t *testing.T) {
	f := newAdminFixture(t)
	for _, path := range []string{"/", "/console"} {
		resp, body := get(t, f.c, path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		assert.Contains(t, body, `<script src="/console/console.js" defer></script>`)
		csp := resp.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "default-src 'self'")
		assert.Contains(t, csp, "connect-src 'self'")
		assert.Contains(t, csp, "frame-ancestors 'none'")
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	}
	resp, body := get(t, f.c, "/console/console.js", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, `new EventSource(admin + "/feed")`)
	assert.NotContains(t, body, "http://", "the page names no other origin")
	assert.NotContains(t, body, "https://")
	resp, _ = get(t, f.c, "/console/console.css", nil)
	assert.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	resp, _ = get(t, f.c, "/console/nothing.js", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// The guard: another site may not load or frame it.
	resp, _ = get(t, f.c, "/", map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site navigation")
	resp, _ = get(t, f.c, "/console", map[string]string{"Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a foreign origin")

	plain := fakeband.New(fakeband.Options{Seed: 1})
	defer plain.Close()
	resp, body = get(t, plain.HTTPClient(), "/", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no console without the admin API: %s", body)
	assert.Contains(t, body, `"error"`)
}

// timeline reads a room's timeline through the admin API.
func (f *adminFixture) timeline(t *testing.T) map[string]any {
	t.Helper()
	status, data := f.admin(t, http.MethodGet, "/timeline?room="+f.room.ID, nil)
	require.Equal(t, http.StatusOK, status, "%v", data)
	return data
}

// item finds the timeline item with the id.
func item(t *testing.T, tl map[string]any, id string) map[string]any {
	t.Helper()
	for _, it := range tl["items"].([]any) {
		if m := it.(map[string]any); m["id"] == id {
			return m
		}
	}
	t.Fatalf("no item %s in the timeline", id)
	return nil
}

// botLife is the bot's life of a timeline item.
func botLife(t *testing.T, it map[string]any) map[string]any {
	t.Helper()
	lives := it["life"].([]any)
	require.Len(t, lives, 1, "one agent recipient")
	return lives[0].(map[string]any)
}

// A message's life in the timeline: its marks and the agent's requests for
// it (the lost one included), the reply it got, and the badge when that
// reply was posted twice; a dead letter's reason; a message held while its
// agent is stopped.
func TestTheTimelineShowsEachMessagesLife(t *testing.T) {
	f := newAdminFixture(t)
	alice := map[string]any{"id": f.alice.ID}

	answered := f.say(t, "hello")
	f.mark(t, answered, "processing", nil)
	reply := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi\n[dedup_key:msg:"+answered+"]", alice))
	require.Equal(t, http.StatusCreated, reply.status, "%s", reply.raw)
	f.mark(t, answered, "processed", nil)

	tl := f.timeline(t)
	it := item(t, tl, answered)
	life := botLife(t, it)
	assert.Equal(t, "processed", life["status"])
	assert.EqualValues(t, 1, life["attempts"])
	assert.Equal(t, false, life["held"])
	var kinds []string
	for _, mk := range life["marks"].([]any) {
		kinds = append(kinds, mk.(map[string]any)["kind"].(string))
	}
	assert.Equal(t, []string{"processing", "processed"}, kinds)
	var reqs []string
	for _, q := range life["requests"].([]any) {
		q := q.(map[string]any)
		reqs = append(reqs, q["endpoint"].(string)+" "+q["outcome"].(string))
	}
	assert.Equal(t, []string{"processing answered", "post answered", "processed answered"}, reqs, "the post is the message's: its attempt was open")
	replyID := reply.data(t)["id"].(string)
	assert.Equal(t, []any{replyID}, it["replies"])
	assert.Equal(t, false, it["posted_twice"])
	r := item(t, tl, replyID)
	assert.Equal(t, answered, r["reply_to"])
	assert.Equal(t, "msg:"+answered, r["dedup_key"])
	assert.Equal(t, "@Alice hi", r["text"], "markers as names, no dedup line")
	assert.EqualValues(t, 1, r["copies"])

	// A naive agent whose reply's answer was lost posts it again: the
	// lost request is in the message's life, and the badge is on the
	// message and on the copies.
	twice := f.say(t, "again")
	f.mark(t, twice, "processing", nil)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
	_, faults := f.admin(t, http.MethodGet, "/faults", nil)
	assert.Equal(t, []any{false}, faults["spent"], "armed")
	_, err := f.try(http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi again\n[dedup_key:msg:"+twice+"]", alice))
	require.ErrorIs(t, err, fakeband.ErrResponseLost)
	_, faults = f.admin(t, http.MethodGet, "/faults", nil)
	assert.Equal(t, []any{true}, faults["spent"], "fired its one time")
	again := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("hi again\n[dedup_key:msg:"+twice+"]", alice))
	require.Equal(t, http.StatusCreated, again.status, "%s", again.raw)
	f.mark(t, twice, "processed", nil)
	tl = f.timeline(t)
	it = item(t, tl, twice)
	assert.Equal(t, true, it["posted_twice"])
	assert.Len(t, it["replies"], 2)
	assert.EqualValues(t, 2, item(t, tl, again.data(t)["id"].(string))["copies"])
	reqs = nil
	for _, q := range botLife(t, it)["requests"].([]any) {
		q := q.(map[string]any)
		reqs = append(reqs, q["endpoint"].(string)+" "+q["outcome"].(string))
		if q["outcome"] == fakeband.OutcomeLost {
			assert.EqualValues(t, 201, q["status"], "the status the lost answer had")
			assert.Equal(t, "lose_response", q["fault"])
		}
	}
	assert.Equal(t, []string{"processing answered", "post lost", "post answered", "processed answered"}, reqs)
	assert.Equal(t, false, item(t, tl, answered)["posted_twice"], "the first message was answered once")

	// A dead letter: failed, with its reason.
	dead := f.say(t, "poison")
	f.mark(t, dead, "processing", nil)
	f.mark(t, dead, "failed", map[string]any{"error": "handler panicked"})
	life = botLife(t, item(t, f.timeline(t), dead))
	assert.Equal(t, "failed", life["status"])
	assert.Equal(t, "handler panicked", life["reason"])

	// Held: delivered while the bot is stopped here, until play.
	require.NoError(t, f.b.StopRoom(f.room.ID))
	held := f.say(t, "are you there?")
	life = botLife(t, item(t, f.timeline(t), held))
	assert.Equal(t, "delivered", life["status"])
	assert.Equal(t, true, life["held"])
	require.NoError(t, f.b.PlayRoom(f.room.ID))
	assert.Equal(t, false, botLife(t, item(t, f.timeline(t), held))["held"])
}

// The timeline answers the latest items only, at most 1000, and says how
// many came before.
func TestTheTimelineIsBounded(t *testing.T) {
	f := newAdminFixture(t)
	for range 5 {
		f.say(t, "again")
	}
	status, data := f.admin(t, http.MethodGet, "/timeline?room=general&limit=2", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Len(t, data["items"], 2)
	assert.EqualValues(t, 3, data["earlier"])
	for _, bad := range []string{"0", "1001", "x"} {
		status, _ := f.admin(t, http.MethodGet, "/timeline?room=general&limit="+bad, nil)
		assert.Equal(t, http.StatusUnprocessableEntity, status, "limit %s", bad)
	}
	status, _ = f.admin(t, http.MethodGet, "/timeline?room=nowhere", nil)
	assert.Equal(t, http.StatusNotFound, status)
}

// Rooms: the list with item counts and stopped agents, and a room made
// from the admin API with its owner and members.
func TestRoomsAreListedAndCreatedThroughTheAdminAPI(t *testing.T) {
	f := newAdminFixture(t)
	f.say(t, "one")
	require.NoError(t, f.b.StopRoom(f.room.ID))
	status, data := f.admin(t, http.MethodPost, "/rooms", map[string]any{"title": "ops", "owner": "Bob", "members": []string{"Bot"}})
	require.Equal(t, http.StatusCreated, status, "%v", data)
	assert.Equal(t, "ops", data["title"])
	assert.Equal(t, f.bob.ID, data["owner_id"])
	assert.Len(t, data["members"], 2)

	list := f.adminList(t, "/rooms")
	require.Len(t, list, 2)
	general, ops := list[0].(map[string]any), list[1].(map[string]any)
	assert.EqualValues(t, 1, general["items"])
	assert.Positive(t, general["last_seq"])
	assert.Equal(t, []any{f.bot.ID}, general["stopped"])
	assert.EqualValues(t, 0, ops["items"])
	assert.Equal(t, []any{}, ops["stopped"])

	for _, bad := range []map[string]any{{"title": " "}, {"title": "x", "owner": "Bot"}, {"title": "x", "members": []string{"nobody"}}} {
		status, _ := f.admin(t, http.MethodPost, "/rooms", bad)
		assert.GreaterOrEqual(t, status, 400, "%v", bad)
	}
	assert.Len(t, f.adminList(t, "/rooms"), 2, "nothing made by a refused call")
}

// adminList reads an admin answer whose data is a list.
func (f *adminFixture) adminList(t *testing.T, path string) []any {
	t.Helper()
	resp, body := get(t, f.c, fakeband.AdminPrefix+path, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var env struct{ Data []any }
	require.NoError(t, json.Unmarshal([]byte(body), &env))
	return env.Data
}

// Stop and play with an agent named act on that agent's execution in the
// room alone; without one, on every agent there.
func TestAdminStopAndPlayTakeAnAgentScope(t *testing.T) {
	f := newAdminFixture(t)
	other := f.b.AddAgent("Other")
	require.NoError(t, f.b.AddParticipant(f.room.ID, other.ID))
	status, data := f.admin(t, http.MethodPost, "/stop", map[string]any{"room": "general", "agent": "Bot"})
	require.Equal(t, http.StatusOK, status, "%v", data)
	assert.Equal(t, []any{f.bot.ID}, data["agent_ids"])
	assert.True(t, f.b.Stopped(f.bot.ID, f.room.ID))
	assert.False(t, f.b.Stopped(other.ID, f.room.ID), "the other agent plays on")
	status, _ = f.admin(t, http.MethodPost, "/play", map[string]any{"room": "general", "agent": "Bot"})
	require.Equal(t, http.StatusOK, status)
	assert.False(t, f.b.Stopped(f.bot.ID, f.room.ID))
	status, _ = f.admin(t, http.MethodPost, "/stop", map[string]any{"room": "general", "agent": "Alice"})
	assert.Equal(t, http.StatusUnprocessableEntity, status, "a human is no agent")
	status, _ = f.admin(t, http.MethodPost, "/stop", map[string]any{"room": "general"})
	require.Equal(t, http.StatusOK, status)
	assert.True(t, f.b.Stopped(f.bot.ID, f.room.ID))
	assert.True(t, f.b.Stopped(other.ID, f.room.ID))
}

// feedClient opens the live feed over TCP, as the page's EventSource does.
type feedClient struct {
	resp *http.Response
	r    *bufio.Reader
}

func openFeed(t *testing.T, root string, header map[string]string) (*http.Response, *feedClient) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, root+fakeband.AdminPrefix+"/feed", nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp, &feedClient{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads the next event's type and data, skipping comments.
func (c *feedClient) next(t *testing.T) (event string, data map[string]any) {
	t.Helper()
	event = "message"
	for {
		line, err := c.r.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && data != nil:
			return event, data
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
		}
	}
}

// The live feed streams the Band's changes as they happen (a post, the
// agent's requests, a fault armed), refuses what the admin API refuses,
// and holds a bounded number of subscribers.
func TestTheFeedStreamsChangesToABoundedNumberOfSubscribers(t *testing.T) {
	f := newAdminFixture(t)
	base, err := f.b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	root := strings.TrimSuffix(base, fakeband.APIPrefix)

	resp, feed := openFeed(t, root, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	event, _ := feed.next(t)
	assert.Equal(t, "hello", event)

	id := f.say(t, "hello")
	event, data := feed.next(t)
	assert.Equal(t, "message", event)
	assert.Equal(t, "post", data["kind"])
	assert.Equal(t, id, data["message_id"])
	assert.Equal(t, f.room.ID, data["room_id"])

	f.mark(t, id, "processing", nil)
	var kinds []string
	for len(kinds) < 2 {
		_, data := feed.next(t)
		kinds = append(kinds, data["kind"].(string))
		if data["kind"] == fakeband.FeedRequest {
			q := data["request"].(map[string]any)
			assert.Equal(t, "processing", q["endpoint"])
			assert.Equal(t, id, q["message_id"])
			assert.EqualValues(t, 200, q["status"])
		}
	}
	assert.Equal(t, []string{"mark", "request"}, kinds)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
	_, data = feed.next(t)
	assert.Equal(t, fakeband.FeedFaults, data["kind"])

	resp, _ = openFeed(t, root, map[string]string{"Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a foreign origin")

	for range 15 {
		resp, _ := openFeed(t, root, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, _ = openFeed(t, root, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the 17th subscriber")
}

// In memory (HTTPClient) a response cannot be streamed: the feed answers
// its hello and ends, rather than holding the request open.
func TestInMemoryTheFeedAnswersItsHelloAndEnds(t *testing.T) {
	f := newAdminFixture(t)
	resp, body := get(t, f.c, fakeband.AdminPrefix+"/feed", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Regexp(t, `^retry: 1000\nevent: hello\ndata: \{"seq":\d+\}\n\n$`, body)
}
