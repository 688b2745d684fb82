package fakeband_test

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/band-once/bandonce/fakeband"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeysAreCheckedPerSide(t *testing.T) {
	f := newFixture(t)
	agentPath := "/agent/me"
	humanPath := "/me/chats/" + f.room.ID + "/messages"
	tests := []struct {
		name, method, path, key string
		status                  int
		code                    string
	}{
		{"agent route without key", http.MethodGet, agentPath, "", 401, "unauthorized"},
		{"agent route with unknown key", http.MethodGet, agentPath, "band_a_nope", 401, "unauthorized"},
		{"agent route with human key", http.MethodGet, agentPath, f.alice.Key, 403, "forbidden"},
		{"agent route with agent key", http.MethodGet, agentPath, f.bot.Key, 200, ""},
		{"human route without key", http.MethodPost, humanPath, "", 401, "unauthorized"},
		{"human route with agent key", http.MethodPost, humanPath, f.bot.Key, 403, "forbidden"},
		{"human route with human key", http.MethodPost, humanPath, f.alice.Key, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.method == http.MethodPost {
				body = post("hello", map[string]any{"id": f.bot.ID})
			}
			resp := f.do(t, tt.method, tt.path, tt.key, body)
			require.Equal(t, tt.status, resp.status, "%s", resp.raw)
			if tt.code != "" {
				assert.Equal(t, tt.code, resp.errorCode(t))
			}
		})
	}
}

func TestErrorEnvelopeCarriesTheRequestID(t *testing.T) {
	f := newFixture(t)
	resp := f.do(t, http.MethodGet, "/agent/me", "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.status)
	e := resp.body(t)["error"].(map[string]any)
	assert.Equal(t, resp.header.Get("X-Request-ID"), e["request_id"])
	assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
}

func TestUnknownRouteIsAJSON404(t *testing.T) {
	f := newFixture(t)
	resp := f.do(t, http.MethodGet, "/agent/nothing-here", f.bot.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.status)
	assert.Equal(t, "not_found", resp.errorCode(t))
}

func TestRequestsAfterCloseAre503(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.b.Close())
	resp := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.status)
	assert.Equal(t, "unavailable", resp.errorCode(t))
}

func TestMeDescribesTheAgent(t *testing.T) {
	f := newFixture(t)
	d := f.do(t, http.MethodGet, "/agent/me", f.bot.Key, nil).data(t)
	assert.Equal(t, f.bot.ID, d["id"])
	assert.Equal(t, "Bot", d["name"])
	assert.Equal(t, "owner/bot", d["handle"])
	assert.Equal(t, f.bot.Handle, d["handle"])
	assert.Equal(t, f.b.Owner().ID, d["owner_uuid"])
	assert.NotEmpty(t, d["inserted_at"])
	assert.NotEmpty(t, d["updated_at"])
}

func TestChatsArePageNumbered(t *testing.T) {
	f := newFixture(t)
	f.b.AddRoom("second", f.alice, f.bot.ID)
	f.b.AddRoom("third", f.alice, f.bot.ID)
	f.b.AddRoom("not mine", f.alice)

	meta := func(r response) map[string]any { return r.body(t)["metadata"].(map[string]any) }
	first := f.do(t, http.MethodGet, "/agent/chats?page_size=2", f.bot.Key, nil)
	require.Equal(t, http.StatusOK, first.status)
	require.Len(t, first.list(t), 2)
	assert.Equal(t, f.room.ID, first.list(t)[0].(map[string]any)["id"])
	assert.Equal(t, "general", first.list(t)[0].(map[string]any)["title"])
	assert.Equal(t, map[string]any{"page": 1.0, "page_size": 2.0, "total_count": 3.0, "total_pages": 2.0}, meta(first))

	second := f.do(t, http.MethodGet, "/agent/chats?page=2&page_size=2", f.bot.Key, nil)
	require.Len(t, second.list(t), 1)
	assert.Equal(t, "third", second.list(t)[0].(map[string]any)["title"])

	beyond := f.do(t, http.MethodGet, "/agent/chats?page=3&page_size=2", f.bot.Key, nil)
	assert.Empty(t, beyond.list(t))
	huge := f.do(t, http.MethodGet, "/agent/chats?page=9223372036854775807", f.bot.Key, nil)
	assert.Empty(t, huge.list(t))

	def := f.do(t, http.MethodGet, "/agent/chats", f.bot.Key, nil)
	assert.Equal(t, 20.0, meta(def)["page_size"])
	assert.Len(t, def.list(t), 3)

	for _, q := range []string{"page_size=101", "page_size=0", "page=0", "page=x", "page_size=-1"} {
		resp := f.do(t, http.MethodGet, "/agent/chats?"+q, f.bot.Key, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, q)
		assert.Equal(t, "validation_error", resp.errorCode(t), q)
	}
}

// The fake's keys are derived from the seed and printed in its docs (seed
// 1's echo key is in docs/fakeband.md), so any web page the developer
// opens can name one. The admin API refuses a foreign Origin for that
// reason; the socket upgrade must too: a browser always sends Origin,
// the SDKs' clients never do. Otherwise a page elsewhere connects as the
// agent, reads its pushes and supersedes its real socket (terminal: the
// agent must not reconnect after it).
func TestTheSocketRefusesAForeignOrigin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fakeband.New(fakeband.Options{Seed: 1})
		defer b.Close()
		bot := b.AddAgent("Bot")
		agent := dialSocket(t, b, bot.Key)
		agent.mustJoin("agent_control:" + bot.ID)

		ws, resp, err := tryDial(b.HTTPClient(), b.SocketURL()+"?vsn=2.0.0&api_key="+bot.Key,
			http.Header{"Origin": {"https://evil.example"}})
		if err == nil {
			defer ws.CloseNow()
		}
		require.NotNil(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a page on https://evil.example opened the agent's socket")
		synctest.Wait()
		frames, closed := agent.pending()
		require.False(t, closed, "the agent's own socket was superseded by the foreign page: %v", frames)
	})
}
