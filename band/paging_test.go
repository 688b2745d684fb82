package band_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/safebuf"
)

// hostile is a Band whose listings never end: next answers the n-th
// request (from 1) with its items and its metadata.
func hostile(t *testing.T, next func(n int, r *http.Request) (data any, meta map[string]any)) (*band.Client, *atomic.Int64, *safebuf.Buffer) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, meta := next(int(n.Add(1)), r)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "metadata": meta})
	}))
	t.Cleanup(srv.Close)
	logs := &safebuf.Buffer{}
	c, err := band.New(band.Config{APIKey: "k", BaseURL: srv.URL + "/api/v1", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	return c, &n, logs
}

func memory(id string) []map[string]any {
	return []map[string]any{{"id": id, "content": "x", "system": "long_term", "type": "semantic", "segment": "user", "scope": "subject"}}
}

// stoppedBy asserts a walk ended with a *PagingError for why, named by
// its templated URL, after want requests, with one warning.
func stoppedBy(t *testing.T, err error, why error, url string, requests int, n *atomic.Int64, logs *safebuf.Buffer) {
	t.Helper()
	var pe *band.PagingError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, why)
	assert.True(t, strings.HasSuffix(pe.URL, url), "%s names %s", pe.URL, url)
	assert.Equal(t, int64(requests), n.Load(), "requests made")
	assert.Equal(t, 1, strings.Count(logs.String(), "band: stopped paging"), logs.String())
}

// Every listing of band walks its pages through one pager: a server
// that repeats a cursor, or a page, or announces pages without end, is
// stopped at once or at the listing's bound with a *PagingError, never
// followed for ever or cut short in silence.
func TestEveryListingStopsAHostileServer(t *testing.T) {
	t.Run("memories: a cursor that points at itself", func(t *testing.T) {
		c, n, logs := hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
			return memory(fmt.Sprint("m", n)), map[string]any{"has_more": true, "next_cursor": "same"}
		})
		got, err := c.Memories(t.Context(), band.MemoryFilter{})
		assert.Nil(t, got)
		stoppedBy(t, err, band.ErrCursorRepeated, "/agent/memories", 2, n, logs)
	})
	t.Run("memories: new cursors without end", func(t *testing.T) {
		c, n, logs := hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
			return memory(fmt.Sprint("m", n)), map[string]any{"has_more": true, "next_cursor": fmt.Sprint("c", n)}
		})
		_, err := c.Memories(t.Context(), band.MemoryFilter{})
		stoppedBy(t, err, band.ErrTooManyPages, "/agent/memories", band.MaxMemoryPages, n, logs)
	})
	t.Run("tasks: two cursors that point at each other", func(t *testing.T) {
		c, n, logs := hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
			return []map[string]any{{"id": fmt.Sprint("t", n), "subject": "s"}}, map[string]any{"has_more": true, "next_cursor": []string{"a", "b"}[n%2]}
		})
		_, err := c.Tasks(t.Context(), "room", "")
		stoppedBy(t, err, band.ErrCursorRepeated, "/agent/chats/{id}/tasks", 3, n, logs)
	})
	t.Run("task history: a cursor repeated", func(t *testing.T) {
		c, n, logs := hostile(t, func(int, *http.Request) (any, map[string]any) {
			return []map[string]any{}, map[string]any{"has_more": true, "next_cursor": "again"}
		})
		_, err := c.TaskHistory(t.Context(), "room", "task")
		stoppedBy(t, err, band.ErrCursorRepeated, "/agent/chats/{id}/tasks/{task_id}/history", 2, n, logs)
	})
	t.Run("contacts: the same page under every number", func(t *testing.T) {
		c, n, logs := hostile(t, func(int, *http.Request) (any, map[string]any) {
			return []map[string]any{{"id": "u1", "handle": "ada"}}, map[string]any{"total_pages": 1_000_000_000}
		})
		_, err := c.Contacts(t.Context())
		stoppedBy(t, err, band.ErrCursorRepeated, "/agent/contacts", 2, n, logs)
	})
	t.Run("contacts: new contacts on pages without end", func(t *testing.T) {
		c, n, logs := hostile(t, func(n int, r *http.Request) (any, map[string]any) {
			page, _ := strconv.Atoi(r.URL.Query().Get("page"))
			assert.Equal(t, n, page, "pages asked in order")
			return []map[string]any{{"id": fmt.Sprint("u", n), "handle": fmt.Sprint("h", n)}}, map[string]any{"total_pages": 1_000_000_000}
		})
		_, err := c.Contacts(t.Context())
		stoppedBy(t, err, band.ErrTooManyPages, "/agent/contacts", band.MaxTaskPages, n, logs)
	})
}

// A listing that ends reads every page once and keeps each item once.
func TestAListingThatEndsIsReadWhole(t *testing.T) {
	c, n, logs := hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
		if n < 3 {
			return memory(fmt.Sprint("m", n)), map[string]any{"has_more": true, "next_cursor": fmt.Sprint("c", n)}
		}
		return memory("m3"), map[string]any{"has_more": false, "next_cursor": nil}
	})
	got, err := c.Memories(t.Context(), band.MemoryFilter{})
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "m3", got[2].ID)
	assert.Equal(t, int64(3), n.Load())
	assert.Empty(t, logs.String())

	c, _, _ = hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
		// Page 2 repeats a contact of page 1 (the list shifted): it is
		// kept once.
		items := []map[string]any{{"id": "u1", "handle": "ada"}, {"id": fmt.Sprint("u", n+1), "handle": "x"}}
		return items, map[string]any{"total_pages": 2}
	})
	contacts, err := c.Contacts(t.Context())
	require.NoError(t, err)
	assert.Len(t, contacts, 3)
}

// A page that says more follow but names no cursor cannot be followed:
// the listing ends with an error that says so, not as though it were whole.
func TestAListingWhosePageNamesNoCursorIsAnError(t *testing.T) {
	for _, meta := range []map[string]any{
		{"has_more": true},
		{"has_more": true, "next_cursor": ""},
		{"has_more": true, "next_cursor": nil},
	} {
		t.Run(fmt.Sprint(meta), func(t *testing.T) {
			c, n, _ := hostile(t, func(n int, _ *http.Request) (any, map[string]any) {
				return memory(fmt.Sprint("m", n)), meta
			})
			_, err := c.Memories(t.Context(), band.MemoryFilter{})
			require.ErrorContains(t, err, "has_more without next_cursor")
			assert.Equal(t, int64(1), n.Load(), "no page asked past it")

			_, err = c.Tasks(t.Context(), "r1", "")
			require.ErrorContains(t, err, "has_more without next_cursor")
		})
	}
}
