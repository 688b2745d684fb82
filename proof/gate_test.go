package proof

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestReplyKeyReadsTheMarkerWithOrWithoutTheFastPath(t *testing.T) {
	for _, tc := range []struct{ content, key string }{
		{"done\n[dedup_key:msg:abc]", "msg:abc"},
		{"done\n[dedup_key:nk:r1:a]\n", "nk:r1:a"},
		{"done\n[dedup_key:quote\"d]", "quote\"d"},
		{"done\n[dedup_key:back\\slash]", "back\\slash"},
		{"done [dedup_key:not-last-line]\nmore", ""},
		{"no marker", ""},
		{"[dedup_key:only]", "only"},
	} {
		body, err := json.Marshal(map[string]any{"message": map[string]any{"content": tc.content, "mentions": []any{}}})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, "http://band.localhost/api/v1/agent/chats/r/messages", bytes.NewReader(body))
		require.NoError(t, err)
		key, err := replyKey(req)
		require.NoError(t, err)
		assert.Equal(t, tc.key, key, "content %q", tc.content)
		again, err := req.GetBody()
		require.NoError(t, err)
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(again)
		assert.Equal(t, body, buf.Bytes(), "the body is left for the fake")
	}
}

func TestRequestsAreClassifiedByEndpointAndRoom(t *testing.T) {
	const chat = "/api/v1/agent/chats/R1"
	for _, tc := range []struct {
		method, path string
		ep           fakeband.Endpoint
		room         string
	}{
		{http.MethodGet, "/api/v1/agent/me", fakeband.EndpointMe, ""},
		{http.MethodGet, "/api/v1/agent/chats", fakeband.EndpointChats, ""},
		{http.MethodGet, chat + "/messages/next", fakeband.EndpointNext, "R1"},
		{http.MethodPost, chat + "/messages/M/processing", fakeband.EndpointProcessing, "R1"},
		{http.MethodPost, chat + "/messages/M/processed", fakeband.EndpointProcessed, "R1"},
		{http.MethodPost, chat + "/messages/M/failed", fakeband.EndpointFailed, "R1"},
		{http.MethodPost, chat + "/messages", fakeband.EndpointPost, "R1"},
		{http.MethodGet, chat + "/context", fakeband.EndpointContext, "R1"},
		{http.MethodGet, "/api/v1/socket/websocket", fakeband.EndpointSocket, ""},
		{http.MethodGet, "/elsewhere", "", ""},
	} {
		ep, room := classify(tc.method, tc.path)
		assert.Equal(t, tc.ep, ep, tc.path)
		assert.Equal(t, tc.room, room, tc.path)
	}
}
