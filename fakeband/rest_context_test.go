package fakeband_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContextIsTheAgentsViewOldestFirst(t *testing.T) {
	f := newFixture(t)
	carol := f.b.AddHuman("Carol")
	require.NoError(t, f.b.AddParticipant(f.room.ID, carol.ID))
	var want []string
	want = append(want, f.say(t, "one"))
	_, err := f.b.Say(f.room.ID, f.alice.ID, "to carol only", carol.ID)
	require.NoError(t, err)
	own := f.do(t, http.MethodPost, f.chat("/messages"), f.bot.Key, post("mine", map[string]any{"id": f.alice.ID}))
	want = append(want, own.data(t)["id"].(string))
	want = append(want, f.say(t, "three"))

	page := func(q string) response { return f.do(t, http.MethodGet, f.chat("/context"+q), f.bot.Key, nil) }
	ids := func(r response) []string {
		var out []string
		for _, it := range r.list(t) {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	meta := func(r response) map[string]any { return r.body(t)["metadata"].(map[string]any) }

	all := page("")
	require.Equal(t, http.StatusOK, all.status)
	assert.Equal(t, want, ids(all))
	assert.Equal(t, map[string]any{"next_cursor": nil, "has_more": false, "limit": 50.0}, meta(all))

	first := page("?limit=2")
	assert.Equal(t, want[:2], ids(first))
	assert.Equal(t, true, meta(first)["has_more"])
	cursor := meta(first)["next_cursor"].(string)

	// The cursor stays valid while messages are appended.
	want = append(want, f.say(t, "four"))
	rest := page("?limit=2&cursor=" + url.QueryEscape(cursor))
	assert.Equal(t, want[2:], ids(rest))
	assert.Equal(t, false, meta(rest)["has_more"])
	assert.Nil(t, meta(rest)["next_cursor"])
}

func TestContextRefusesBadParameters(t *testing.T) {
	f := newFixture(t)
	f.say(t, "one")
	pos := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := map[string]string{
		"?limit=101":                "validation_error",
		"?limit=0":                  "validation_error",
		"?limit=ten":                "validation_error",
		"?cursor=%25%25":            "invalid_cursor",
		"?cursor=" + pos("pos:99"):  "invalid_cursor",
		"?cursor=" + pos("pos:-1"):  "invalid_cursor",
		"?cursor=" + pos("page:1"):  "invalid_cursor",
		"?cursor=" + pos("pos:one"): "invalid_cursor",
	}
	for q, code := range tests {
		t.Run(q, func(t *testing.T) {
			resp := f.do(t, http.MethodGet, f.chat("/context"+q), f.bot.Key, nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.status)
			assert.Equal(t, code, resp.errorCode(t))
		})
	}
	ok := f.do(t, http.MethodGet, f.chat("/context?limit=100&cursor="+pos("pos:1")), f.bot.Key, nil)
	require.Equal(t, http.StatusOK, ok.status, "a cursor at the end is valid")
	assert.Empty(t, ok.list(t))
	other := f.b.AddRoom("other", f.alice)
	assert.Equal(t, http.StatusNotFound, f.do(t, http.MethodGet, "/agent/chats/"+other.ID+"/context", f.bot.Key, nil).status)
}
