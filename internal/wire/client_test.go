package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each endpoint sends the method, path, query, headers and body Band
// documents.
func TestRequestShapes(t *testing.T) {
	tests := []struct {
		name      string
		reply     answer
		call      func(context.Context, *Client) error
		method    string
		path      string
		query     string
		body      string // JSON; "" means no body at all
		retryable bool
	}{
		{
			name: "me", reply: ok(200, agentJSON),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Me(ctx); return err },
			method: "GET", path: "/api/v1/agent/me",
		},
		{
			name: "chats", reply: ok(200, `{"data":[],"metadata":{"total_pages":1}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Chats(ctx); return err },
			method: "GET", path: "/api/v1/agent/chats", query: "page=1&page_size=100",
		},
		{
			name: "next", reply: ok(204, ""),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Next(ctx, "c1"); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/messages/next",
		},
		{
			name: "next escapes the chat id", reply: ok(204, ""),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Next(ctx, "a/b?c"); return err },
			method: "GET", path: "/api/v1/agent/chats/a%2Fb%3Fc/messages/next",
		},
		{
			name: "processing", reply: ok(200, markJSON),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Processing(ctx, "c1", "m1"); return err },
			method: "POST", path: "/api/v1/agent/chats/c1/messages/m1/processing",
		},
		{
			name: "processed", reply: ok(200, markJSON),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Processed(ctx, "c1", "m1"); return err },
			method: "POST", path: "/api/v1/agent/chats/c1/messages/m1/processed",
		},
		{
			name: "failed", reply: ok(200, markJSON),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Failed(ctx, "c1", "m1", "model <timeout> & gave up")
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/messages/m1/failed",
			body: `{"error":"model <timeout> & gave up"}`,
		},
		{
			name: "post", reply: ok(201, `{"data":{"id":"p1","success":true,"recipients":[]}}`),
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Post(ctx, "c1", "hi @ann", []Mention{{ID: "u1"}, {ID: "u2"}})
				return err
			},
			method: "POST", path: "/api/v1/agent/chats/c1/messages",
			body: `{"message":{"content":"hi @ann","mentions":[{"id":"u1"},{"id":"u2"}]}}`,
		},
		{
			name: "post without mentions sends an empty array", reply: ok(201, `{"data":{"id":"p1"}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Post(ctx, "c1", "hi", nil); return err },
			method: "POST", path: "/api/v1/agent/chats/c1/messages",
			body: `{"message":{"content":"hi","mentions":[]}}`,
		},
		{
			name: "context first page, server default limit", reply: ok(200, `{"data":[],"metadata":{"has_more":false}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Context(ctx, "c1", "", 0); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/context",
		},
		{
			name: "context cursor and limit", reply: ok(200, `{"data":[],"metadata":{"has_more":false}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Context(ctx, "c1", "g3Q=&x", 20); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/context", query: "cursor=g3Q%3D%26x&limit=20",
		},
		{
			name: "context limit clamped to 100", reply: ok(200, `{"data":[],"metadata":{"has_more":false}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Context(ctx, "c1", "", 5000); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/context", query: "limit=100",
		},
		{
			name: "context negative limit means default", reply: ok(200, `{"data":[],"metadata":{"has_more":false}}`),
			call:   func(ctx context.Context, c *Client) error { _, err := c.Context(ctx, "c1", "", -3); return err },
			method: "GET", path: "/api/v1/agent/chats/c1/context",
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
			assert.Equal(t, "application/json", h.Header.Get("Accept"))
			if tt.body == "" {
				assert.Empty(t, h.Body)
				assert.Empty(t, h.Header.Get("Content-Type"), "no body, no content type")
			} else {
				assert.JSONEq(t, tt.body, h.Body)
				assert.Equal(t, "application/json", h.Header.Get("Content-Type"))
			}
		})
	}
}

func TestBaseURLTrailingSlashIsIgnored(t *testing.T) {
	s := newStub(sequence(ok(200, agentJSON)))
	c := NewClient(testBase+"/", testKey, s.client(once).doer)
	_, err := c.Me(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "/api/v1/agent/me", s.requests()[0].Path)
}

func TestMeParsesTheAgent(t *testing.T) {
	s := newStub(sequence(ok(200, agentJSON)))
	a, err := s.client(once).Me(t.Context())
	require.NoError(t, err)
	assert.Equal(t, &Agent{ID: "a1", Name: "Bot", Handle: "ann/bot", OwnerUUID: "u1"}, a)
}

func TestNextParsesTheMessage(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":`+messageJSON+`}`)))
	m, err := s.client(once).Next(t.Context(), "c1")
	require.NoError(t, err)
	assert.Equal(t, &Message{
		ID: "m1", Content: "hello @[[a1]]", MessageType: "text", SenderID: "u1", SenderType: "User",
		SenderName: "Ann", ChatRoomID: "c1", InsertedAt: time.Date(2026, 6, 13, 10, 0, 0, 0, time.UTC),
		Metadata: Metadata{raw: json.RawMessage(`{"mentions":[{"id":"a1"}]}`)},
	}, m)
}

func TestNextAcceptsEmptyContent(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":{"id":"m1","content":"","sender_id":"u1"}}`)))
	m, err := s.client(once).Next(t.Context(), "c1")
	require.NoError(t, err)
	assert.Equal(t, "", m.Content)
}

func TestNextNothingToDo(t *testing.T) {
	s := newStub(sequence(ok(204, "")))
	m, err := s.client(once).Next(t.Context(), "c1")
	assert.NoError(t, err)
	assert.Nil(t, m)
}

func TestNextUnknownRoomIs404(t *testing.T) {
	s := newStub(sequence(answer{status: 404, body: `{"error":{"code":"not_found","message":"Chat room not found","request_id":"r9"}}`}))
	m, err := s.client(once).Next(t.Context(), "c1")
	assert.Nil(t, m)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, &APIError{Endpoint: EndpointNext, Status: 404, Code: "not_found", Message: "Chat room not found", RequestID: "r9"}, apiErr)
	assert.False(t, apiErr.Transient())
}

func TestMarksParse(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":{"id":"m1","status":"failed","attempt_number":3,"success":true}}`)))
	c := s.client(once)
	want := &Mark{ID: "m1", Status: "failed", AttemptNumber: 3, Success: true}
	for name, call := range map[string]func() (*Mark, error){
		"processing": func() (*Mark, error) { return c.Processing(t.Context(), "c1", "m1") },
		"processed":  func() (*Mark, error) { return c.Processed(t.Context(), "c1", "m1") },
		"failed":     func() (*Mark, error) { return c.Failed(t.Context(), "c1", "m1", "x") },
	} {
		m, err := call()
		require.NoError(t, err, name)
		assert.Equal(t, want, m, name)
	}
}

func TestPostParsesRecipients(t *testing.T) {
	s := newStub(sequence(ok(201, `{"data":{"id":"p1","success":true,"recipients":[{"id":"u1","handle":"ann","name":"Ann"}]}}`)))
	p, err := s.client(once).Post(t.Context(), "c1", "hi", []Mention{{ID: "u1"}})
	require.NoError(t, err)
	assert.Equal(t, "p1", p.ID)
	assert.True(t, p.Success)
	require.Len(t, p.Recipients, 1)
	assert.Equal(t, "u1", p.Recipients[0].ID)
	assert.Equal(t, "ann", p.Recipients[0].Handle)
}

func TestChatsWalksEveryPage(t *testing.T) {
	pages := []string{
		`{"data":[{"id":"c1","title":"one"},{"id":"c2","title":null}],"metadata":{"page":1,"page_size":100,"total_count":4,"total_pages":3}}`,
		// c2 again: the list shifted between pages.
		`{"data":[{"id":"c2"},{"id":"c3"}],"metadata":{"page":2,"total_pages":3}}`,
		`{"data":[{"id":"c4","task_id":"t1"}],"metadata":{"page":3,"total_pages":3}}`,
	}
	s := newStub(func(n int, r *http.Request) answer { return ok(200, pages[min(n, 2)]) })
	chats, err := s.client(once).Chats(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []Chat{{ID: "c1", Title: "one"}, {ID: "c2"}, {ID: "c3"}, {ID: "c4"}}, chats)
	hits := s.requests()
	require.Len(t, hits, 3)
	for i, h := range hits {
		assert.Equal(t, fmt.Sprintf("page=%d&page_size=100", i+1), h.Query)
	}
}

func TestChatsStopsAtAnEmptyPage(t *testing.T) {
	// A server announcing a billion pages but running out of rooms.
	s := newStub(func(n int, r *http.Request) answer {
		if n == 0 {
			return ok(200, `{"data":[{"id":"c1"}],"metadata":{"total_pages":1000000000}}`)
		}
		return ok(200, `{"data":[],"metadata":{"total_pages":1000000000}}`)
	})
	chats, err := s.client(once).Chats(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []Chat{{ID: "c1"}}, chats)
	assert.Len(t, s.requests(), 2)
}

func TestChatsWithoutMetadataIsOnePage(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":[{"id":"c1"}]}`)))
	chats, err := s.client(once).Chats(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []Chat{{ID: "c1"}}, chats)
	assert.Len(t, s.requests(), 1)
}

func TestChatsGivesUpOnEndlessPages(t *testing.T) {
	s := newStub(func(n int, r *http.Request) answer {
		return ok(200, fmt.Sprintf(`{"data":[{"id":"c%d"}],"metadata":{"total_pages":99999999}}`, n))
	})
	chats, err := s.client(once).Chats(t.Context())
	assert.Nil(t, chats)
	var pe *PagingError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrTooManyPages)
	assert.Equal(t, EndpointChats, pe.Endpoint)
	assert.Equal(t, testBase+"/agent/chats", pe.URL)
	assert.Len(t, s.requests(), MaxPages)
}

func TestContextPage(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *ContextPage
	}{
		{
			name: "more to come",
			body: `{"data":[` + messageJSON + `,{"id":"m2","content":"x","sender_id":"a1"}],"metadata":{"next_cursor":"cur2","has_more":true,"limit":2},"meta":{"page":1}}`,
			want: &ContextPage{HasMore: true, NextCursor: "cur2"},
		},
		{
			name: "last page with a null cursor",
			body: `{"data":[],"metadata":{"next_cursor":null,"has_more":false,"limit":50}}`,
			want: &ContextPage{Items: []Message{}},
		},
		{
			name: "a cursor without has_more is dropped",
			body: `{"data":[],"metadata":{"next_cursor":"stale","has_more":false}}`,
			want: &ContextPage{Items: []Message{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(sequence(ok(200, tt.body)))
			page, err := s.client(once).Context(t.Context(), "c1", "", 0)
			require.NoError(t, err)
			assert.Equal(t, tt.want.HasMore, page.HasMore)
			assert.Equal(t, tt.want.NextCursor, page.NextCursor)
			if tt.want.Items != nil {
				assert.Equal(t, tt.want.Items, page.Items)
			}
		})
	}
	t.Run("items parsed in order", func(t *testing.T) {
		s := newStub(sequence(ok(200, tests[0].body)))
		page, err := s.client(once).Context(t.Context(), "c1", "", 0)
		require.NoError(t, err)
		require.Len(t, page.Items, 2)
		assert.Equal(t, "m1", page.Items[0].ID)
		assert.Equal(t, "hello @[[a1]]", page.Items[0].Content)
		assert.Equal(t, "m2", page.Items[1].ID)
		assert.Equal(t, "a1", page.Items[1].SenderID)
	})
}

func TestInvalidIDsSendNothing(t *testing.T) {
	s := newStub(sequence(ok(200, markJSON)))
	c := s.client(once)
	ctx := t.Context()
	calls := map[string]func() error{
		"next empty":          func() error { _, err := c.Next(ctx, ""); return err },
		"next dot-dot":        func() error { _, err := c.Next(ctx, ".."); return err },
		"processing empty id": func() error { _, err := c.Processing(ctx, "c1", ""); return err },
		"processed dot":       func() error { _, err := c.Processed(ctx, ".", "m1"); return err },
		"failed empty":        func() error { _, err := c.Failed(ctx, "c1", "", "r"); return err },
		"post empty":          func() error { _, err := c.Post(ctx, "", "hi", nil); return err },
		"context empty":       func() error { _, err := c.Context(ctx, "", "", 0); return err },
	}
	for name, call := range calls {
		err := call()
		assert.ErrorIs(t, err, ErrInvalidID, name)
	}
	assert.Empty(t, s.requests())
}

func TestFailedReasonIsCutOnARuneBoundary(t *testing.T) {
	tests := []struct {
		name, reason, want string
	}{
		{"short", "boom", "boom"},
		{"exactly the limit", strings.Repeat("a", MaxFailureReason), strings.Repeat("a", MaxFailureReason)},
		{"ascii over", strings.Repeat("b", MaxFailureReason+5), strings.Repeat("b", MaxFailureReason)},
		// "a" then three-byte runes: 1+3·666 = 1999 fits, one more would not.
		{"three-byte runes", "a" + strings.Repeat("€", 1000), "a" + strings.Repeat("€", 666)},
		{"two-byte runes", strings.Repeat("é", 1500), strings.Repeat("é", 1000)},
		{"invalid bytes become U+FFFD", "ok\xff\xfe", "ok\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(sequence(ok(200, markJSON)))
			_, err := s.client(once).Failed(t.Context(), "c1", "m1", tt.reason)
			require.NoError(t, err)
			var sent struct{ Error string }
			require.NoError(t, json.Unmarshal([]byte(s.requests()[0].Body), &sent))
			assert.Equal(t, tt.want, sent.Error)
			assert.LessOrEqual(t, len(sent.Error), MaxFailureReason)
			assert.True(t, utf8.ValidString(sent.Error))
		})
	}
}

func TestNilDoerSendsWithTheDefaultClient(t *testing.T) {
	// No network: the base URL's scheme is refused before any dial.
	c := NewClient("nope://band.test", testKey, nil)
	_, err := c.Me(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), EndpointMe)
}

func TestConcurrentCallsAreSafe(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":`+messageJSON+`}`)))
	c := s.client(RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, Seed: 1})
	errs := make(chan error, 16)
	for range 16 {
		go func() { _, err := c.Next(t.Context(), "c1"); errs <- err }()
	}
	for range 16 {
		assert.NoError(t, <-errs)
	}
	assert.Len(t, s.requests(), 16)
}
