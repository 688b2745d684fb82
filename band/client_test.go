package band_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/memnet"
)

// roomDouble is a room's participants endpoints, enough to test the
// client's handling of repeated adds and removes.
type roomDouble struct {
	mu      sync.Mutex
	members map[string]bool
	hits    []string
}

func (d *roomDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hits = append(d.hits, r.Method+" "+r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	participant := func(id string) string {
		return `{"id":"` + id + `","name":"N","handle":"h-` + id + `","type":"Agent","role":"member","status":"active"}`
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/agent/chats/c1/participants":
		var items []string
		for id := range d.members {
			items = append(items, participant(id))
		}
		_, _ = w.Write([]byte(`{"data":[` + strings.Join(items, ",") + `]}`))
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/agent/chats/c1/participants":
		var body struct {
			Participant struct {
				ID string `json:"participant_id"`
			} `json:"participant"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if d.members[body.Participant.ID] {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":{"code":"validation_error","message":"already a participant","request_id":"r1","details":{"/participant/participant_id":["is taken"]}}}`))
			return
		}
		d.members[body.Participant.ID] = true
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"data":` + participant(body.Participant.ID) + `}`))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/api/v1/agent/chats/c1/participants/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/agent/chats/c1/participants/")
		if !d.members[id] {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"Not found","request_id":"r2"}}`))
			return
		}
		delete(d.members, id)
		_, _ = w.Write([]byte(`{"data":` + participant(id) + `}`))
	case r.URL.Path == "/api/v1/agent/chats/gone/participants":
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"Not found","request_id":"r3"}}`))
	default:
		w.WriteHeader(http.StatusTeapot)
	}
}

func newClient(t *testing.T, h http.Handler) *band.Client {
	t.Helper()
	c, err := band.New(band.Config{APIKey: "band_a_test", BaseURL: "http://band.localhost/api/v1", HTTPClient: memnet.Client(h)})
	require.NoError(t, err)
	return c
}

// A repeated add or remove (a redelivered handler, a retry after a lost
// answer) has the effect of one and is not an error.
func TestRepeatedAddsAndRemovesHaveTheEffectOfOne(t *testing.T) {
	ctx := context.Background()
	d := &roomDouble{members: map[string]bool{"a0": true}}
	c := newClient(t, d)

	p, err := c.AddParticipant(ctx, "c1", "a1", band.RoleMember)
	require.NoError(t, err)
	assert.Equal(t, "a1", p.ID)
	p, err = c.AddParticipant(ctx, "c1", "a1", band.RoleMember)
	require.NoError(t, err, "already in the room")
	assert.Equal(t, "a1", p.ID)

	require.NoError(t, c.RemoveParticipant(ctx, "c1", "a1"))
	require.NoError(t, c.RemoveParticipant(ctx, "c1", "a1"), "already gone")
	ps, err := c.Participants(ctx, "c1")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, "a0", ps[0].ID)
}

// Band's refusals come back as *APIError, which errors.As reads as a
// *bandonce.APIError too, with the status and code.
func TestBandErrorsAreAPIErrors(t *testing.T) {
	c := newClient(t, &roomDouble{members: map[string]bool{}})
	_, err := c.Participants(context.Background(), "gone")
	var apiErr *bandonce.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.Status)
	assert.Equal(t, "not_found", apiErr.Code)
	assert.Equal(t, "GET /agent/chats/{id}/participants", apiErr.Endpoint)

	err = c.RemoveParticipant(context.Background(), "gone", "a1")
	require.ErrorAs(t, err, &apiErr, "a room the agent is not in is still an error")
}

func TestParticipantFindsAHandleWithOrWithoutTheAt(t *testing.T) {
	c := newClient(t, &roomDouble{members: map[string]bool{"a1": true}})
	for _, h := range []string{"h-a1", "@h-a1"} {
		p, ok, err := c.Participant(context.Background(), "c1", h)
		require.NoError(t, err)
		require.True(t, ok, h)
		assert.Equal(t, "a1", p.ID)
	}
	_, ok, err := c.Participant(context.Background(), "c1", "@nobody")
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]band.Config{
		"no key":             {},
		"relative base":      {APIKey: "k", BaseURL: "/api"},
		"ws base":            {APIKey: "k", BaseURL: "ws://band.test"},
		"negative timeout":   {APIKey: "k", RequestTimeout: -1},
		"negative attempts":  {APIKey: "k", Retry: band.RetryPolicy{MaxAttempts: -1}},
		"base above the max": {APIKey: "k", Retry: band.RetryPolicy{BaseDelay: 10, MaxDelay: 5}},
		"plaintext abroad":   {APIKey: "k", BaseURL: "http://band.example.com/api/v1"},
		"key in the URL":     {APIKey: "k", BaseURL: "https://u:p@band.example.com/api/v1"},
	} {
		_, err := band.New(cfg)
		assert.Error(t, err, name)
	}
	for _, ok := range []band.Config{
		{APIKey: "k", BaseURL: "http://127.0.0.1:8080/api/v1"},
		{APIKey: "k", BaseURL: "http://band.example.com/api/v1", InsecurePlaintext: true},
	} {
		_, err := band.New(ok)
		assert.NoError(t, err, ok.BaseURL)
	}
}

func TestPrintingAConfigShowsNoKey(t *testing.T) {
	const key = "band_a_0123456789abcdef"
	cfg := band.Config{APIKey: key, BaseURL: "https://band.example.com/api/v1"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg)
	for _, out := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), logged.String()} {
		assert.NotContains(t, out, key)
		assert.Contains(t, out, "[redacted]")
	}
}
