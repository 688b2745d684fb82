package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/; `go test` replays
// them, `go test -fuzz=FuzzName` explores from them.

// roundTripFunc answers in the calling goroutine: fuzzing runs millions of
// requests and needs no handler goroutine per request.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cannedClient answers every request with status, header and body. Pages
// of /agent/chats after the first are empty, so a body announcing many
// pages costs one more request, not thousands.
func cannedClient(status int, header http.Header, body []byte) *Client {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		b := body
		if p := r.URL.Query().Get("page"); p != "" && p != "1" {
			b = []byte(`{"data":[]}`)
		}
		return &http.Response{StatusCode: status, Header: header.Clone(), Body: io.NopCloser(bytes.NewReader(b)),
			ContentLength: int64(len(b)), Request: r}, nil
	})
	return NewClient(testBase, testKey, NewRetryDoer(&http.Client{Transport: rt}, once))
}

// fuzzCalls are the calls whose 2xx answers FuzzSuccessDecoding feeds.
// Each returns, with its error, a check of the value it got.
var fuzzCalls = []struct {
	endpoint string
	call     func(context.Context, *Client) (check func(t *testing.T, status int), err error)
}{
	{EndpointMe, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		a, err := c.Me(ctx)
		return func(t *testing.T, _ int) { assert.NotEmpty(t, a.ID) }, err
	}},
	{EndpointChats, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		chats, err := c.Chats(ctx)
		return func(t *testing.T, _ int) {
			seen := map[string]bool{}
			for _, ch := range chats {
				assert.NotEmpty(t, ch.ID)
				assert.False(t, seen[ch.ID], "chat %q listed twice", ch.ID)
				seen[ch.ID] = true
			}
		}, err
	}},
	{EndpointNext, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		m, err := c.Next(ctx, "c1")
		return func(t *testing.T, status int) {
			if status == http.StatusNoContent {
				assert.Nil(t, m)
				return
			}
			require.NotNil(t, m, "only a 204 means nothing to do")
			assert.NotEmpty(t, m.ID)
			assert.NotEmpty(t, m.SenderID)
		}, err
	}},
	{EndpointProcessing, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		m, err := c.Processing(ctx, "c1", "m1")
		return func(t *testing.T, _ int) { assert.GreaterOrEqual(t, m.AttemptNumber, 1) }, err
	}},
	{EndpointProcessed, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		m, err := c.Processed(ctx, "c1", "m1")
		return func(t *testing.T, _ int) { assert.NotNil(t, m) }, err
	}},
	{EndpointFailed, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		m, err := c.Failed(ctx, "c1", "m1", "why")
		return func(t *testing.T, _ int) { assert.NotNil(t, m) }, err
	}},
	{EndpointPost, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		p, err := c.Post(ctx, "c1", "hi", nil)
		return func(t *testing.T, _ int) { assert.NotEmpty(t, p.ID) }, err
	}},
	{EndpointContext, func(ctx context.Context, c *Client) (func(*testing.T, int), error) {
		page, err := c.Context(ctx, "c1", "", 0)
		return func(t *testing.T, _ int) {
			require.NotNil(t, page)
			assert.Equal(t, page.HasMore, page.NextCursor != "", "a cursor exactly when more follow")
			for _, m := range page.Items {
				assert.NotEmpty(t, m.ID)
				assert.NotEmpty(t, m.SenderID)
			}
		}, err
	}},
}

// FuzzSuccessDecoding feeds any 2xx body to every call. It must never
// panic, and it either returns a value that has the required fields or a
// *ProtocolError that names the call and quotes at most 512 bytes.
func FuzzSuccessDecoding(f *testing.F) {
	f.Add(uint8(2), uint16(0), []byte(`{"data":`+messageJSON+`}`))
	f.Fuzz(func(t *testing.T, which uint8, status uint16, body []byte) {
		fc := fuzzCalls[int(which)%len(fuzzCalls)]
		st := 200 + int(status%100)
		check, err := fc.call(t.Context(), cannedClient(st, http.Header{}, body))
		if err == nil {
			check(t, st)
			return
		}
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "a 2xx fails only as a protocol error: %v", err)
		assert.Equal(t, fc.endpoint, pe.Endpoint)
		assert.Equal(t, st, pe.Status)
		assert.NotEmpty(t, pe.Reason)
		assert.LessOrEqual(t, len(pe.Body), MaxBodyExcerpt)
		assert.True(t, bytes.HasPrefix(body, []byte(pe.Body)), "Body is the start of the body")
		assert.Contains(t, pe.Error(), fc.endpoint)
		var apiErr *APIError
		assert.False(t, errors.As(err, &apiErr))
	})
}

// FuzzErrorDecoding feeds any non-2xx answer. Every one becomes an
// *APIError with the status, a non-negative Retry-After, and either the
// envelope's code or message or the start of the body.
func FuzzErrorDecoding(f *testing.F) {
	f.Add(uint16(29), "", []byte{})
	f.Fuzz(func(t *testing.T, status uint16, retryAfter string, body []byte) {
		st := 400 + int(status%200)
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		m, err := cannedClient(st, h, body).Next(t.Context(), "c1")
		assert.Nil(t, m)
		var e *APIError
		require.ErrorAs(t, err, &e)
		assert.Equal(t, EndpointNext, e.Endpoint)
		assert.Equal(t, st, e.Status)
		assert.GreaterOrEqual(t, e.RetryAfter, time.Duration(0))
		assert.LessOrEqual(t, len(e.Body), MaxBodyExcerpt)
		assert.True(t, bytes.HasPrefix(body, []byte(e.Body)), "Body is the start of the body")
		if e.Body == "" && len(body) > 0 {
			assert.True(t, e.Code != "" || e.Message != "", "a body is kept unless the envelope was read")
		}
		if secs, perr := strconv.ParseUint(strings.TrimSpace(retryAfter), 10, 32); perr == nil {
			assert.Equal(t, time.Duration(secs)*time.Second, e.RetryAfter)
		}
		assert.Equal(t, st == 429 || st >= 500, e.Transient())
		assert.Contains(t, e.Error(), EndpointNext)
		assert.Contains(t, e.Error(), strconv.Itoa(st))
	})
}

// FuzzTruncateUTF8 checks the failure-reason cut: never longer than the
// limit, always valid UTF-8, a prefix of the sanitised input, and no
// shorter than it has to be.
func FuzzTruncateUTF8(f *testing.F) {
	f.Add("a€€", uint16(4))
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		limit := int(n % 4096)
		got := truncateUTF8(s, limit)
		clean := strings.ToValidUTF8(s, "\uFFFD")
		assert.LessOrEqual(t, len(got), limit)
		assert.True(t, utf8.ValidString(got))
		require.True(t, strings.HasPrefix(clean, got))
		if rest := clean[len(got):]; rest != "" {
			_, size := utf8.DecodeRuneInString(rest)
			assert.Greater(t, len(got)+size, limit, "the next rune would not have fit")
		}
	})
}
