package fakeband_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestPostIsValidatedLikeBand(t *testing.T) {
	f := newFixture(t)
	outsider := f.b.AddHuman("Outsider")
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	alice := m("id", f.alice.ID)
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"blank content", post("  \n\t", alice), 422, "validation_error"},
		{"invisible-only content", post("\u200b\u200d\ufeff", alice), 422, "validation_error"},
		{"not JSON", "{", 422, "validation_error"},
		{"no message object", map[string]any{"content": "hi"}, 422, "validation_error"},
		{"content not a string", map[string]any{"message": map[string]any{"content": 5, "mentions": []any{alice}}}, 422, "validation_error"},
		{"mentions not a list", map[string]any{"message": map[string]any{"content": "hi", "mentions": "alice"}}, 422, "validation_error"},
		{"no mentions", post("hi"), 422, "mentions_required"},
		{"mentions missing", map[string]any{"message": map[string]any{"content": "hi"}}, 422, "mentions_required"},
		{"references only", post("hi", m("id", f.alice.ID, "kind", "reference")), 422, "mentions_required"},
		{"mention without id or handle", post("hi", m("name", "Alice")), 422, "mention_missing_identifier"},
		{"unknown handle", post("hi", m("handle", "nobody")), 422, "handle_not_found"},
		{"id not in room", post("hi", m("id", outsider.ID)), 422, "mentioned_participant_not_in_room"},
		{"unknown id", post("hi", m("id", "00000000-0000-4000-8000-000000000000")), 422, "mentioned_participant_not_in_room"},
		{"handle not in room", post("hi", m("handle", outsider.Handle)), 422, "mentioned_participant_not_in_room"},
		{"self by id", post("hi", m("id", f.bot.ID)), 422, "cannot_mention_self"},
		{"self by handle", post("hi", m("handle", f.bot.Handle)), 422, "cannot_mention_self"},
		{"same participant twice", post("hi", alice, m("handle", f.alice.Handle)), 422, "duplicate_mentions"},
		{"bad kind", post("hi", m("id", f.alice.ID, "kind", "shout")), 422, "invalid_mention_kind"},
		{"body over MaxBody", post(strings.Repeat("x", fakeband.MaxBody), alice), 413, "payload_too_large"},
		{"by id", post("hi", alice), 201, ""},
		{"by handle", post("hi", m("handle", f.alice.Handle)), 201, ""},
		{"by @handle", post("hi", m("handle", "@"+f.alice.Handle)), 201, ""},
		{"id wins over handle", post("hi", m("id", f.alice.ID, "handle", "nobody")), 201, ""},
		{"extra fields are ignored", map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{alice}, "message_type": "text"}}, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.b.Posts(f.room.ID))
			resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, tt.body)
			require.Equal(t, tt.status, resp.status, "%s", resp.raw)
			if tt.code != "" {
				assert.Equal(t, tt.code, resp.errorCode(t))
				assert.Len(t, f.b.Posts(f.room.ID), before, "a refused post stores nothing")
				return
			}
			assert.Len(t, f.b.Posts(f.room.ID), before+1)
		})
	}
}

func TestPostOutsideTheAgentsRoomsIs404(t *testing.T) {
	f := newFixture(t)
	other := f.b.AddRoom("other", f.alice)
	resp := f.do(t, http.MethodPost, "/agent/chats/"+other.ID+"/messages", f.bot.Key, post("hi", map[string]any{"id": f.alice.ID}))
	require.Equal(t, http.StatusNotFound, resp.status)
	assert.Equal(t, "not_found", resp.errorCode(t))
}

func TestPostPrependsMarkersAndDelivers(t *testing.T) {
	f := newFixture(t)
	helper := f.b.AddAgent("Helper")
	require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))

	resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("@[["+helper.ID+"]] please look",
		map[string]any{"id": f.alice.ID},
		map[string]any{"handle": helper.Handle, "kind": "mention"},
		map[string]any{"id": f.b.Owner().ID, "kind": "reference"},
	))
	// The owner is not in the room, so the reference is refused first.
	require.Equal(t, http.StatusUnprocessableEntity, resp.status)

	resp = f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("@[["+helper.ID+"]] please look",
		map[string]any{"id": f.alice.ID},
		map[string]any{"handle": helper.Handle, "kind": "mention"},
	))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.raw)
	d := resp.data(t)
	id := d["id"].(string)
	assert.Equal(t, true, d["success"])
	assert.Equal(t, []any{
		map[string]any{"id": f.alice.ID, "handle": "alice", "name": "Alice"},
		map[string]any{"id": helper.ID, "handle": helper.Handle, "name": "Helper"},
	}, d["recipients"])

	posts := f.b.Posts(f.room.ID)
	require.Len(t, posts, 1)
	assert.Equal(t, "@[["+f.alice.ID+"]] @[["+helper.ID+"]] please look", posts[0].Content,
		"one marker per mention, skipping the one the content already starts with")
	assert.Equal(t, []string{f.alice.ID, helper.ID}, posts[0].Mentions)
	assert.Equal(t, "Agent", posts[0].SenderType)
	assert.Equal(t, "delivered", f.b.Status(f.alice.ID, id))
	assert.Equal(t, "delivered", f.b.Status(helper.ID, id))
	assert.Equal(t, "", f.b.Status(f.bot.ID, id))

	next := f.do(t, http.MethodGet, f.chat("/messages/next"), helper.Key, nil)
	require.Equal(t, http.StatusOK, next.status)
	assert.Equal(t, id, next.data(t)["id"], "an agent mentioned by another agent gets it on /next")
}

func TestReferencesAreRecordedButNotDelivered(t *testing.T) {
	f := newFixture(t)
	helper := f.b.AddAgent("Helper")
	require.NoError(t, f.b.AddParticipant(f.room.ID, helper.ID))
	resp := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("see",
		map[string]any{"id": f.alice.ID}, map[string]any{"id": helper.ID, "kind": "reference"}))
	require.Equal(t, http.StatusCreated, resp.status)
	d := resp.data(t)
	assert.Len(t, d["recipients"], 1)
	id := d["id"].(string)
	assert.Equal(t, "", f.b.Status(helper.ID, id))
	assert.Equal(t, http.StatusNoContent, f.do(t, http.MethodGet, f.chat("/messages/next"), helper.Key, nil).status)
	assert.Equal(t, "@[["+f.alice.ID+"]] @[["+helper.ID+"]] see", f.b.Posts(f.room.ID)[0].Content)
}

func TestServedMessageHasTheChatMessageShape(t *testing.T) {
	f := newFixture(t)
	id := f.say(t, "hello bot")
	d := f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).data(t)
	assert.Equal(t, id, d["id"])
	assert.Equal(t, "@[["+f.bot.ID+"]] hello bot", d["content"])
	assert.Equal(t, "text", d["message_type"])
	assert.Equal(t, f.alice.ID, d["sender_id"])
	assert.Equal(t, "User", d["sender_type"])
	assert.Equal(t, "Alice", d["sender_name"])
	assert.Equal(t, f.room.ID, d["chat_room_id"])
	assert.NotEmpty(t, d["inserted_at"])
	assert.Equal(t, d["inserted_at"], d["updated_at"])
	assert.Equal(t, map[string]any{"mentions": []any{
		map[string]any{"id": f.bot.ID, "handle": f.bot.Handle, "name": "Bot"},
	}}, d["metadata"])
}

func TestHumansPostOverHTTP(t *testing.T) {
	f := newFixture(t)
	path := "/me/chats/" + f.room.ID + "/messages"
	resp := f.do(t, http.MethodPost, path, f.alice.Key, post("do it", map[string]any{"handle": f.bot.Handle}))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.raw)
	id := resp.data(t)["id"].(string)
	assert.Equal(t, id, f.do(t, http.MethodGet, f.chat("/messages/next"), f.bot.Key, nil).data(t)["id"])

	self := f.do(t, http.MethodPost, path, f.alice.Key, post("me", map[string]any{"id": f.alice.ID}))
	require.Equal(t, http.StatusUnprocessableEntity, self.status)
	assert.Equal(t, "cannot_mention_self", self.errorCode(t))

	stranger := f.b.AddHuman("Stranger")
	resp = f.do(t, http.MethodPost, path, stranger.Key, post("hi", map[string]any{"id": f.bot.ID}))
	require.Equal(t, http.StatusNotFound, resp.status)
}

// stalledBody is a request body whose client declared a length and then
// sent nothing: Read reports that it was called, then blocks until release.
type stalledBody struct {
	reading chan<- struct{}
	release <-chan struct{}
	once    bool
}

func (s *stalledBody) Read([]byte) (int, error) {
	if !s.once {
		s.once = true
		s.reading <- struct{}{}
	}
	<-s.release
	return 0, io.EOF
}

// A request that declares a body near MaxBody and sends none must not
// make the Band hold a MiB for it: the fake allocates the declared length
// up front (readAtMost), before a byte arrived, and Listen's server has
// no read timeout, so a client holding such requests open holds a MiB
// each, for a few header bytes.
func TestADeclaredBodyLengthIsNotAllocatedBeforeItArrives(t *testing.T) {
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	bot := b.AddAgent("Bot")
	const n = 64
	reading, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		req := httptest.NewRequest(http.MethodPost, "http://"+fakeband.Host+"/api/v1/agent/chats", nil)
		req.Body = io.NopCloser(&stalledBody{reading: reading, release: release})
		req.ContentLength = fakeband.MaxBody - 1
		req.Header.Set("X-API-Key", bot.Key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}()
	}
	for range n {
		<-reading
	}
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	close(release)
	wg.Wait()
	grown := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	require.Less(t, grown, int64(8<<20), "%d requests that sent no body byte hold %d MiB", n, grown>>20)
}
