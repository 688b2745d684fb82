package fakeband_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/fakeband"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a Band with one human owner (alice), one agent (bot) and a
// room holding both, reached through the in-memory client.
type fixture struct {
	b     *fakeband.Band
	c     *http.Client
	alice fakeband.Human
	bot   fakeband.Agent
	room  fakeband.Room
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	f := &fixture{b: b, c: b.HTTPClient(), alice: b.AddHuman("Alice"), bot: b.AddAgent("Bot")}
	f.room = b.AddRoom("general", f.alice, f.bot.ID)
	return f
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	raw    []byte
}

// body decodes the JSON body into a generic map.
func (r response) body(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.raw, &v), "body %q", r.raw)
	return v
}

func (r response) data(t *testing.T) map[string]any {
	t.Helper()
	d, ok := r.body(t)["data"].(map[string]any)
	require.True(t, ok, "data is not an object: %s", r.raw)
	return d
}

func (r response) list(t *testing.T) []any {
	t.Helper()
	d, ok := r.body(t)["data"].([]any)
	require.True(t, ok, "data is not a list: %s", r.raw)
	return d
}

// errorCode is error.code of an error envelope.
func (r response) errorCode(t *testing.T) string {
	t.Helper()
	e, ok := r.body(t)["error"].(map[string]any)
	require.True(t, ok, "no error envelope: %s", r.raw)
	require.NotEmpty(t, e["request_id"])
	require.NotEmpty(t, e["message"])
	if r.status == http.StatusUnprocessableEntity {
		require.NotEmpty(t, e["details"], "a 422 always has details")
	}
	code, _ := e["code"].(string)
	return code
}

// do sends one request; path is under /api/v1, body nil means none.
func (f *fixture) do(t *testing.T, method, path, key string, body any) response {
	t.Helper()
	resp, err := f.try(method, path, key, body)
	require.NoError(t, err)
	return resp
}

func (f *fixture) try(method, path, key string, body any) (response, error) {
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = bytes.NewReader([]byte(s))
	} else if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.b.BaseURL()+path, rd)
	if err != nil {
		return response{}, err
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := f.c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, raw: raw}, err
}

func (f *fixture) chat(path string) string { return "/agent/chats/" + f.room.ID + path }

// say posts as alice mentioning the bot and returns the message id.
func (f *fixture) say(t *testing.T, content string) string {
	t.Helper()
	id, err := f.b.Say(f.room.ID, f.alice.ID, content, f.bot.ID)
	require.NoError(t, err)
	return id
}

func (f *fixture) mark(t *testing.T, msgID, kind string, body any) response {
	t.Helper()
	return f.do(t, http.MethodPost, f.chat("/messages/"+msgID+"/"+kind), f.bot.Key, body)
}

func post(content string, mentions ...map[string]any) map[string]any {
	if mentions == nil {
		mentions = []map[string]any{}
	}
	return map[string]any{"message": map[string]any{"content": content, "mentions": mentions}}
}

// serveOnce sends one request straight to the Band's handler and reports
// a panic as a test failure instead of crashing the process (the
// in-memory client serves on the caller's goroutine, where a handler's
// panic would take the whole test binary down).
func serveOnce(t *testing.T, b *fakeband.Band, method, path, key, body string) (rec *httptest.ResponseRecorder) {
	t.Helper()
	req := httptest.NewRequest(method, "http://"+fakeband.Host+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec = httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s %s panicked: %v", method, path, p)
		}
	}()
	b.Handler().ServeHTTP(rec, req)
	return rec
}
