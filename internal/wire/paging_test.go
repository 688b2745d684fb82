package wire

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contextBody is a /context page of the given messages.
func contextBody(items []string, next string) string {
	meta := `{"has_more":false,"next_cursor":null}`
	if next != "" {
		meta = `{"has_more":true,"next_cursor":"` + next + `"}`
	}
	return `{"data":[` + strings.Join(items, ",") + `],"metadata":` + meta + `}`
}

func item(id, content string) string {
	return fmt.Sprintf(`{"id":%q,"content":%q,"sender_id":"a1","sender_type":"Agent"}`, id, content)
}

// walk reads every page and returns the ids seen and the pages handed over.
func walk(t *testing.T, c *Client, from string) (ids []string, pages []*ContextPage, last string, err error) {
	t.Helper()
	w := &ContextWalk{Cursor: from}
	err = c.WalkContext(t.Context(), "c1", w, func(p *ContextPage) error {
		pages = append(pages, p)
		for _, m := range p.Items {
			ids = append(ids, m.ID)
		}
		return nil
	})
	return ids, pages, w.Cursor, err
}

// Paging: a cursor that points back at a page already read ends the walk
// at once with a *PagingError naming the URL, never a loop.
func TestAWalkStopsOnACursorThatRepeats(t *testing.T) {
	for _, tt := range []struct {
		name string
		next func(cursor string) string
		want int // requests
	}{
		{"a page pointing at itself", func(cursor string) string { return cmp.Or(cursor, "self") }, 2},
		{"two pages pointing at each other", func(cursor string) string { return map[string]string{"": "a", "a": "b", "b": "a"}[cursor] }, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(func(n int, r *http.Request) answer {
				return ok(200, contextBody([]string{item("m"+strconv.Itoa(n), "x")}, tt.next(r.URL.Query().Get("cursor"))))
			})
			_, _, _, err := walk(t, s.client(once), "")
			var pe *PagingError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, ErrCursorRepeated)
			assert.Equal(t, EndpointContext, pe.Endpoint)
			assert.Equal(t, testBase+"/agent/chats/{id}/context", pe.URL)
			assert.NotContains(t, err.Error(), testKey)
			assert.Len(t, s.requests(), tt.want)
		})
	}
}

// Paging: a server that keeps minting fresh cursors is stopped at
// MaxPages.
func TestAWalkStopsAtThePageLimit(t *testing.T) {
	s := newStub(func(n int, r *http.Request) answer {
		return ok(200, contextBody(nil, "c"+strconv.Itoa(n)))
	})
	_, _, _, err := walk(t, s.client(once), "")
	require.ErrorIs(t, err, ErrTooManyPages)
	assert.Len(t, s.requests(), MaxPages)
}

// Paging: a walk resumes from the cursor it was given and returns the
// cursor of its last page.
func TestAWalkReturnsTheCursorOfItsLastPage(t *testing.T) {
	s := newStub(func(n int, r *http.Request) answer {
		switch r.URL.Query().Get("cursor") {
		case "":
			return ok(200, contextBody([]string{item("m1", "x")}, "p2"))
		default:
			return ok(200, contextBody([]string{item("m2", "y")}, ""))
		}
	})
	ids, _, last, err := walk(t, s.client(once), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m2"}, ids)
	assert.Equal(t, "p2", last)
}

// Shrinking: a page over the cap is asked again with half the items, down
// to what fits; past it the pages grow back.
func TestAPageOverTheCapIsAskedAgainSmaller(t *testing.T) {
	const cap = 4000
	big := strings.Repeat("z", 900) // five of them fit under the cap, not ten
	var room []string
	for i := range 40 {
		room = append(room, item("m"+strconv.Itoa(i), big))
	}
	var limits []int
	s := newStub(func(n int, r *http.Request) answer {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		limits = append(limits, limit)
		end := min(from+limit, len(room))
		next := ""
		if end < len(room) {
			next = strconv.Itoa(end)
		}
		return ok(200, contextBody(room[from:end], next))
	})
	c := s.client(once)
	c.SetMaxBodyBytes(cap)
	ids, _, _, err := walk(t, c, "")
	require.NoError(t, err)
	require.Len(t, ids, 40, "every message read, none twice")
	assert.Equal(t, "m0", ids[0])
	assert.Equal(t, "m39", ids[39])
	assert.Equal(t, []int{100, 50, 25, 12, 6, 3}, limits[:6], "halved until a page fits")
	assert.Contains(t, limits, 3)
	assert.NotContains(t, limits[6:], 100, "never back to a page that cannot fit for long")

	// A later walk resumes at the last page, at the size that fitted.
	w := &ContextWalk{}
	require.NoError(t, c.WalkContext(t.Context(), "c1", w, func(*ContextPage) error { return nil }))
	limits = nil
	require.NoError(t, c.WalkContext(t.Context(), "c1", w, func(*ContextPage) error { return nil }))
	assert.Equal(t, []int{w.Limit}, limits, "one request, no oversize page asked first")
	assert.Less(t, w.Limit, 5)
}

// Shrinking: one item too large on its own is handed over without its
// content, and the walk goes on past it.
func TestOneItemOverTheCapIsSkippedWithItsSize(t *testing.T) {
	huge := strings.Repeat("z", 10_000)
	s := newStub(func(n int, r *http.Request) answer {
		switch r.URL.Query().Get("cursor") {
		case "":
			return ok(200, contextBody([]string{item("huge", huge)}, "p2"))
		default:
			return ok(200, contextBody([]string{item("m2", "y")}, ""))
		}
	})
	c := s.client(once)
	c.SetMaxBodyBytes(3000)
	ids, pages, _, err := walk(t, c, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"huge", "m2"}, ids)
	require.NotNil(t, pages[0].Oversize)
	assert.Empty(t, pages[0].Items[0].Content)
	assert.Equal(t, "a1", pages[0].Items[0].SenderID)
	assert.Nil(t, pages[1].Oversize)
	assert.Contains(t, pages[0].Oversize.Error(), strconv.Itoa(len(contextBody([]string{item("huge", huge)}, "p2")))+" bytes")
}

// The cap: a /next answer over it is a *TooLargeError that names its size
// and still gives the message's ids, so the message can be dead-lettered.
func TestANextAnswerOverTheCapNamesItsSizeAndItsMessage(t *testing.T) {
	body := `{"data":{"content":"` + strings.Repeat("z", MaxBodyBytes) + `","id":"m1","sender_id":"u1","sender_type":"User"}}`
	s := newStub(sequence(ok(200, body)))
	_, err := s.client(once).Next(t.Context(), "c1")
	var big *TooLargeError
	require.ErrorAs(t, err, &big)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Equal(t, int64(len(body)), big.Size)
	assert.False(t, big.AtLeast)
	assert.Equal(t, MaxBodyBytes, big.Cap)
	require.NotNil(t, big.Message)
	assert.Equal(t, "m1", big.Message.ID)
	assert.Equal(t, "u1", big.Message.SenderID)
	assert.Contains(t, err.Error(), fmt.Sprintf("answer of %d bytes exceeds the %d-byte cap", len(body), MaxBodyBytes))
}

// The cap: a /next answer far past it is read to its end for its ids,
// however far; another answer is read on only to four times the cap, its
// size then the one it declared.
func TestAFarTooLargeAnswerIsReadToItsEndOnlyForItsIDs(t *testing.T) {
	next := `{"data":{"content":"` + strings.Repeat("z", 10_000) + `","id":"m1","sender_id":"u1"}}`
	s := newStub(sequence(ok(200, next)))
	c := s.client(once)
	c.SetMaxBodyBytes(1000)
	_, err := c.Next(t.Context(), "c1")
	var big *TooLargeError
	require.ErrorAs(t, err, &big)
	assert.Equal(t, int64(len(next)), big.Size)
	assert.False(t, big.AtLeast)
	require.NotNil(t, big.Message, "the ids after ten times the cap")
	assert.Equal(t, "m1", big.Message.ID)
	assert.Equal(t, "u1", big.Message.SenderID)

	me := `{"data":{"name":"` + strings.Repeat("z", 10_000) + `","id":"a1"}}`
	c = NewClient(testBase, testKey, unknownLength(me))
	c.SetMaxBodyBytes(1000)
	_, err = c.Me(t.Context())
	require.ErrorAs(t, err, &big)
	assert.Equal(t, int64(4000), big.Size, "read on to four times the cap")
	assert.True(t, big.AtLeast)
}

// A cap of math.MaxInt, a caller's way to say "no cap", is kept as
// MaxBodyCap, so reading an answer of unknown length on past the cap
// cannot overflow: the answer is read, not a panic.
func TestTheLargestCapReadsAnAnswerOfUnknownLength(t *testing.T) {
	c := NewClient(testBase, testKey, unknownLength(`{"data":{"id":"a1","name":"A","handle":"o/a","type":"Agent"}}`))
	c.SetMaxBodyBytes(math.MaxInt)
	me, err := c.Me(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "a1", me.ID)
}

// unknownLength answers every request 200 with body, its length not
// declared, as a chunked answer comes.
type unknownLength string

func (b unknownLength) Do(req *http.Request, _ string, _ bool) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: -1,
		Body: io.NopCloser(strings.NewReader(string(b))), Request: req}, nil
}

// Paging: a page-numbered listing whose server ignores the page number
// serves the same page again; that repeat ends the walk.
func TestAListingThatRepeatsItsFirstPageStops(t *testing.T) {
	s := newStub(sequence(ok(200, `{"data":[{"id":"c1"}],"metadata":{"total_pages":50}}`)))
	_, err := s.client(once).Chats(t.Context())
	require.ErrorIs(t, err, ErrCursorRepeated)
	assert.Len(t, s.requests(), 2)

	s = newStub(sequence(ok(200, `{"data":[{"id":"x1","name":"X","handle":"o/x","type":"Agent"}],"metadata":{"total_pages":50}}`)))
	_, err = s.client(once).Peers(t.Context(), "")
	var pe *PagingError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, testBase+"/agent/peers", pe.URL)
	assert.Len(t, s.requests(), 2)
}
