package wire

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const participantJSON = `{"id":"p1","name":"Ada","handle":"ada","type":"User","role":"member","status":"active"}`

// The tool endpoints send the method, path, query and body Band documents.
func TestToolRequestShapes(t *testing.T) {
	tests := []struct {
		name   string
		reply  answer
		call   func(context.Context, *Client) error
		method string
		path   string
		query  string
		body   string
	}{
		{
			name: "event with metadata", reply: ok(201, `{"data":{"id":"e1","message_type":"tool_call","success":true}}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Event(ctx, "c1", "tool_call", "calling lookup", map[string]any{"id": "call-1", "dedup_key": "k"})
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/events",
			body: `{"event":{"content":"calling lookup","message_type":"tool_call","metadata":{"id":"call-1","dedup_key":"k"}}}`,
		},
		{
			name: "event without metadata", reply: ok(201, `{"data":{"id":"e1","message_type":"thought","success":true}}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Event(ctx, "c1", "thought", "hmm", nil)
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/events",
			body: `{"event":{"content":"hmm","message_type":"thought"}}`,
		},
		{
			name: "participants", reply: ok(200, `{"data":[`+participantJSON+`]}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Participants(ctx, "c1"); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/participants",
		},
		{
			name: "add participant", reply: ok(201, `{"data":`+participantJSON+`}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.AddParticipant(ctx, "c1", "p1", "admin")
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/participants",
			body: `{"participant":{"participant_id":"p1","role":"admin"}}`,
		},
		{
			name: "add participant, default role", reply: ok(201, `{"data":`+participantJSON+`}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.AddParticipant(ctx, "c1", "p1", "")
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/participants",
			body: `{"participant":{"participant_id":"p1"}}`,
		},
		{
			name: "remove participant", reply: ok(200, `{"data":`+participantJSON+`}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.RemoveParticipant(ctx, "c1", "p/1")
				return err
			},
			method: "DELETE", path: "/api/v1/agent/chats/c1/participants/p%2F1",
		},
		{
			name: "peers", reply: ok(200, `{"data":[],"metadata":{"page":1,"page_size":100,"total_count":0,"total_pages":0}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Peers(ctx, "c1"); return err },
			method: "GET", path: "/api/v1/agent/peers", query: "not_in_chat=c1&page=1&page_size=100",
		},
		{
			name: "create chat", reply: ok(201, `{"data":{"id":"c9","title":"Incident 8842","task_id":null,"inserted_at":"2026-06-13T10:00:00Z","updated_at":"2026-06-13T10:00:00Z"}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.CreateChat(ctx, "Incident 8842"); return err },
			method: "POST", path: "/api/v1/agent/chats",
			body: `{"chat":{"title":"Incident 8842"}}`,
		},
		{
			name: "create chat untitled", reply: ok(201, `{"data":{"id":"c9","title":null,"inserted_at":"2026-06-13T10:00:00Z","updated_at":"2026-06-13T10:00:00Z"}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.CreateChat(ctx, ""); return err },
			method: "POST", path: "/api/v1/agent/chats",
			body: `{"chat":{}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(sequence(tt.reply))
			require.NoError(t, tt.call(t.Context(), s.client(once)))
			hits := s.requests()
			require.Len(t, hits, 1)
			h := hits[0]
			assert.Equal(t, tt.method, h.Method)
			assert.Equal(t, tt.path, h.Path)
			assert.Equal(t, tt.query, h.Query)
			assert.Equal(t, testKey, h.Header.Get("X-API-Key"))
			if tt.body == "" {
				assert.Empty(t, h.Body)
			} else {
				assert.JSONEq(t, tt.body, h.Body)
			}
		})
	}
}

func TestToolAnswersParse(t *testing.T) {
	ctx := context.Background()
	s := newStub(sequence(ok(200, `{"data":[`+participantJSON+`,{"id":"a2","name":"Bot","handle":null,"type":"Agent","role":"owner","status":"active"}]}`)))
	ps, err := s.client(once).Participants(ctx, "c1")
	require.NoError(t, err)
	assert.Equal(t, []Participant{
		{ID: "p1", Name: "Ada", Handle: "ada", Type: "User", Role: "member", Status: "active"},
		{ID: "a2", Name: "Bot", Type: "Agent", Role: "owner", Status: "active"},
	}, ps)

	s = newStub(sequence(ok(201, `{"data":{"id":"c9","title":null,"task_id":"t1","inserted_at":"2026-06-13T10:00:00Z","updated_at":"2026-06-13T10:00:00Z"}}`)))
	room, err := s.client(once).CreateChat(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, Room{ID: "c9", TaskID: "t1", InsertedAt: time.Date(2026, 6, 13, 10, 0, 0, 0, time.UTC)}, *room)

	for name, body := range map[string]string{
		"event without id":       `{"data":{"message_type":"thought","success":true}}`,
		"participant without id": `{"data":{"name":"x"}}`,
		"chat without id":        `{"data":{"title":"x"}}`,
	} {
		s := newStub(sequence(ok(201, body)))
		c := s.client(once)
		var err error
		switch name {
		case "event without id":
			_, err = c.Event(ctx, "c1", "thought", "x", nil)
		case "participant without id":
			_, err = c.AddParticipant(ctx, "c1", "p1", "")
		default:
			_, err = c.CreateChat(ctx, "x")
		}
		var pe *ProtocolError
		assert.ErrorAs(t, err, &pe, name)
	}
}

// Peers are page-numbered like chats: every page is read, a peer listed
// twice (the list shifted) is returned once.
func TestPeersWalksEveryPage(t *testing.T) {
	s := newStub(func(n int, r *http.Request) answer {
		switch r.URL.Query().Get("page") {
		case "1":
			return ok(200, `{"data":[{"id":"x1","name":"X","handle":"o/x","type":"Agent","source":"registry","is_contact":false}],"metadata":{"total_pages":2}}`)
		default:
			return ok(200, `{"data":[{"id":"x1","name":"X","handle":"o/x","type":"Agent","source":"registry","is_contact":false},{"id":"u2","name":"Ann","handle":"ann","type":"User","description":null,"source":"contact","is_contact":true}],"metadata":{"total_pages":2}}`)
		}
	})
	peers, err := s.client(once).Peers(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, peers, 2)
	assert.Equal(t, Peer{ID: "u2", Name: "Ann", Handle: "ann", Type: "User", Source: "contact", IsContact: true}, peers[1])
	assert.Len(t, s.requests(), 2)
}

// An event, like a post, is never re-sent below the caller; adds and
// removes are changes of state and are retried like reads.
func TestEventsAreSentOnceAndParticipantChangesRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		retry := RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
		s := newStub(sequence(answer{status: 503}, ok(201, `{"data":{"id":"e1","message_type":"thought","success":true}}`)))
		_, err := s.client(retry).Event(context.Background(), "c1", "thought", "x", nil)
		var apiErr *APIError
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, 503, apiErr.Status)
		assert.Len(t, s.requests(), 1, "an event is sent once")

		s = newStub(sequence(answer{status: 503}, ok(201, `{"data":`+participantJSON+`}`)))
		_, err = s.client(retry).AddParticipant(context.Background(), "c1", "p1", "")
		require.NoError(t, err)
		assert.Len(t, s.requests(), 2)

		s = newStub(sequence(answer{status: 502}, ok(200, `{"data":`+participantJSON+`}`)))
		_, err = s.client(retry).RemoveParticipant(context.Background(), "c1", "p1")
		require.NoError(t, err)
		assert.Len(t, s.requests(), 2)

		s = newStub(sequence(answer{status: 503}, ok(201, `{"data":{"id":"c9","inserted_at":"2026-06-13T10:00:00Z","updated_at":"2026-06-13T10:00:00Z"}}`)))
		_, err = s.client(retry).CreateChat(context.Background(), "x")
		require.Error(t, err)
		assert.Len(t, s.requests(), 1, "a room is created once")
	})
}

func TestToolsRefuseInvalidIDs(t *testing.T) {
	s := newStub(sequence(ok(200, `{}`)))
	c := s.client(once)
	ctx := context.Background()
	_, err := c.Event(ctx, "..", "thought", "x", nil)
	assert.True(t, errors.Is(err, ErrInvalidID))
	_, err = c.AddParticipant(ctx, "c1", "", "")
	assert.True(t, errors.Is(err, ErrInvalidID))
	_, err = c.RemoveParticipant(ctx, "c1", ".")
	assert.True(t, errors.Is(err, ErrInvalidID))
	_, err = c.Participants(ctx, "")
	assert.True(t, errors.Is(err, ErrInvalidID))
	assert.Empty(t, s.requests())
}
