package fakeband_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// tcpFixture is a fixture whose client talks to Listen over real TCP.
func tcpFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	base, err := f.b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(base, "http://127.0.0.1:"), base)
	require.True(t, strings.HasSuffix(base, "/api/v1"), base)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	f.c = &http.Client{Transport: tr}
	return f, base
}

func (f *fixture) doAt(t *testing.T, base, method, path, key, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	resp, err := f.c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func TestListenServesOverTCP(t *testing.T) {
	f, base := tcpFixture(t)
	resp, err := f.doAt(t, base, http.MethodGet, "/agent/me", f.bot.Key, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	body := `{"message":{"content":"hi","mentions":[{"id":"` + f.alice.ID + `"}]}}`
	resp, err = f.doAt(t, base, http.MethodPost, "/agent/chats/"+f.room.ID+"/messages", f.bot.Key, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Len(t, f.b.Posts(f.room.ID), 1)
}

func TestLoseResponseOverTCPClosesTheConnection(t *testing.T) {
	f, base := tcpFixture(t)
	f.b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
	body := `{"message":{"content":"hi","mentions":[{"id":"` + f.alice.ID + `"}]}}`
	_, err := f.doAt(t, base, http.MethodPost, "/agent/chats/"+f.room.ID+"/messages", f.bot.Key, body)
	require.Error(t, err, "the client sees a transport error")
	assert.Len(t, f.b.Posts(f.room.ID), 1, "but the post was applied")
}

func TestListenStopsAtClose(t *testing.T) {
	f, base := tcpFixture(t)
	require.NoError(t, f.b.Close())
	f.c.Transport.(*http.Transport).CloseIdleConnections()
	_, err := f.doAt(t, base, http.MethodGet, "/agent/me", f.bot.Key, "")
	require.Error(t, err, "the listener is closed")
	_, err = f.b.Listen("127.0.0.1:0")
	assert.ErrorIs(t, err, fakeband.ErrClosed)
}

func TestListenReportsABadAddress(t *testing.T) {
	f := newFixture(t)
	_, err := f.b.Listen("not an address")
	assert.Error(t, err)
}

func TestSocketOverTCP(t *testing.T) {
	f, base := tcpFixture(t)
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/socket/websocket"
	ws, resp, err := tryDial(f.c, wsURL, http.Header{"X-Api-Key": {f.bot.Key}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	c := startClient(t, ws)
	c.mustJoin("chat_room:" + f.room.ID)
	id := f.say(t, "over the wire")
	push := c.next()
	assert.Equal(t, "message_created", push.Event)
	assert.Equal(t, id, payload(t, push)["id"])

	_, resp, err = tryDial(f.c, wsURL, http.Header{"X-Api-Key": {"bad"}})
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.NoError(t, f.b.Close())
	_, open := <-c.frames
	assert.False(t, open, "Close ends TCP sockets too")
}
