package wire

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every non-2xx, whatever its body, becomes an *APIError with what could
// be read from it.
func TestAPIErrorShapes(t *testing.T) {
	html := "<html><head><title>502 Bad Gateway</title></head><body>awselb/2.0</body></html>"
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name  string
		reply answer
		want  APIError // Endpoint is always EndpointMe
	}{
		{
			name:  "enveloped 403",
			reply: answer{status: 403, body: `{"error":{"code":"forbidden","message":"Agent authentication required","request_id":"req-1"}}`},
			want:  APIError{Status: 403, Code: "forbidden", Message: "Agent authentication required", RequestID: "req-1"},
		},
		{
			name: "422 with details",
			reply: answer{status: 422, body: `{"error":{"code":"validation_error","message":"Invalid","request_id":"req-2",` +
				`"details":{"/message/content":["can't be blank"],"/message/mentions":["required","too short"]}}}`},
			want: APIError{Status: 422, Code: "validation_error", Message: "Invalid", RequestID: "req-2",
				Details: map[string][]string{"/message/content": {"can't be blank"}, "/message/mentions": {"required", "too short"}}},
		},
		{
			name:  "load balancer 429 with an empty body",
			reply: answer{status: 429, header: map[string]string{"Server": "awselb/2.0"}},
			want:  APIError{Status: 429},
		},
		{
			name:  "429 with Retry-After seconds",
			reply: answer{status: 429, header: map[string]string{"Retry-After": "7"}},
			want:  APIError{Status: 429, RetryAfter: 7 * time.Second},
		},
		{
			name:  "Retry-After date in the past means no wait",
			reply: answer{status: 503, header: map[string]string{"Retry-After": "Fri, 31 Dec 1999 23:59:59 GMT"}},
			want:  APIError{Status: 503},
		},
		{
			name:  "unparseable Retry-After is ignored",
			reply: answer{status: 503, header: map[string]string{"Retry-After": "soon"}},
			want:  APIError{Status: 503},
		},
		{
			name:  "HTML 502 from a proxy",
			reply: answer{status: 502, header: map[string]string{"Content-Type": "text/html"}, body: html},
			want:  APIError{Status: 502, Body: html},
		},
		{
			name:  "garbage",
			reply: answer{status: 500, body: "\x00\xff{not json"},
			want:  APIError{Status: 500, Body: "\x00\xff{not json"},
		},
		{
			name:  "long garbage is cut to 512 bytes",
			reply: answer{status: 500, body: long},
			want:  APIError{Status: 500, Body: long[:MaxBodyExcerpt]},
		},
		{
			name:  "JSON that is not the envelope",
			reply: answer{status: 400, body: `{"detail":"bad"}`},
			want:  APIError{Status: 400, Body: `{"detail":"bad"}`},
		},
		{
			name:  "error as a bare string",
			reply: answer{status: 404, body: `{"error":"Not Found"}`},
			want:  APIError{Status: 404, Message: "Not Found", Body: `{"error":"Not Found"}`},
		},
		{
			name:  "a wrongly typed member keeps the others and the body",
			reply: answer{status: 409, body: `{"error":{"code":409,"message":"conflict","request_id":"r"}}`},
			want:  APIError{Status: 409, Message: "conflict", RequestID: "r", Body: `{"error":{"code":409,"message":"conflict","request_id":"r"}}`},
		},
		{
			name:  "details of the wrong shape keep the body",
			reply: answer{status: 422, body: `{"error":{"code":"v","message":"m","details":{"/x":"one"}}}`},
			want:  APIError{Status: 422, Code: "v", Message: "m", Body: `{"error":{"code":"v","message":"m","details":{"/x":"one"}}}`},
		},
		{
			name:  "request id from the header when the body has none",
			reply: answer{status: 401, header: map[string]string{"X-Request-ID": "hdr-7"}},
			want:  APIError{Status: 401, RequestID: "hdr-7"},
		},
		{
			name:  "a redirect that is not followed",
			reply: answer{status: 304},
			want:  APIError{Status: 304},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(sequence(tt.reply))
			a, err := s.client(once).Me(t.Context())
			assert.Nil(t, a)
			var got *APIError
			require.ErrorAs(t, err, &got)
			want := tt.want
			want.Endpoint = EndpointMe
			assert.Equal(t, &want, got)
			assert.Contains(t, got.Error(), EndpointMe)
			assert.Equal(t, tt.want.Status == 429 || tt.want.Status >= 500, got.Transient())
		})
	}
}

func TestRetryAfterDateInTheFuture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
		s := newStub(sequence(answer{status: 429, header: map[string]string{"Retry-After": at}}))
		_, err := s.client(once).Me(t.Context())
		var got *APIError
		require.ErrorAs(t, err, &got)
		assert.Equal(t, 90*time.Second, got.RetryAfter)
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 6, 13, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 120 ", 120 * time.Second, true},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", time.Duration(math.MaxInt64), true},
		{"99999999999999999999999999", time.Duration(math.MaxInt64), true},
		{"Sat, 13 Jun 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 13-Jun-26 12:01:00 GMT", time.Minute, true}, // RFC 850
		{"Sat Jun 13 12:00:05 2026", 5 * time.Second, true},     // ANSI C
		{"Sat, 13 Jun 2026 11:00:00 GMT", 0, true},
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		assert.Equal(t, tt.wantOK, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

// A 2xx the client cannot use is a *ProtocolError, never a panic and
// never a half-filled value.
func TestProtocolErrors(t *testing.T) {
	type call func(context.Context, *Client) (any, error)
	next := func(ctx context.Context, c *Client) (any, error) { return c.Next(ctx, "c1") }
	me := func(ctx context.Context, c *Client) (any, error) { return c.Me(ctx) }
	processing := func(ctx context.Context, c *Client) (any, error) { return c.Processing(ctx, "c1", "m1") }
	post := func(ctx context.Context, c *Client) (any, error) { return c.Post(ctx, "c1", "hi", nil) }
	chats := func(ctx context.Context, c *Client) (any, error) { return c.Chats(ctx) }
	contextPage := func(ctx context.Context, c *Client) (any, error) { return c.Context(ctx, "c1", "", 0) }
	tests := []struct {
		name     string
		call     call
		endpoint string
		reply    answer
		reason   string // a fragment of Reason
	}{
		{"next 200 with an empty body", next, EndpointNext, ok(200, ""), "no body"},
		{"next 200 with whitespace only", next, EndpointNext, ok(200, " \n"), "no body"},
		{"next not JSON", next, EndpointNext, ok(200, "<html>ok</html>"), "envelope"},
		{"next truncated JSON", next, EndpointNext, ok(200, `{"data":{"id":"m1"`), "envelope"},
		{"next trailing garbage", next, EndpointNext, ok(200, `{"data":`+messageJSON+`} x`), "envelope"},
		{"next envelope is an array", next, EndpointNext, ok(200, `[1,2]`), "envelope"},
		{"next envelope is null", next, EndpointNext, ok(200, `null`), "no data"},
		{"next without data", next, EndpointNext, ok(200, `{"message":"ok"}`), "no data"},
		{"next with null data", next, EndpointNext, ok(200, `{"data":null}`), "no data"},
		{"next data is an array", next, EndpointNext, ok(200, `{"data":[]}`), "data"},
		{"next message without id", next, EndpointNext, ok(200, `{"data":{"content":"x","sender_id":"u1"}}`), "no id"},
		{"next message with empty id", next, EndpointNext, ok(200, `{"data":{"id":"","content":"x","sender_id":"u1"}}`), "no id"},
		{"next message without sender", next, EndpointNext, ok(200, `{"data":{"id":"m1","content":"x"}}`), "no sender_id"},
		{"next message without content", next, EndpointNext, ok(200, `{"data":{"id":"m1","sender_id":"u1"}}`), "no content"},
		{"next message with null content", next, EndpointNext, ok(200, `{"data":{"id":"m1","sender_id":"u1","content":null}}`), "no content"},
		{"next id of the wrong type", next, EndpointNext, ok(200, `{"data":{"id":7,"content":"x","sender_id":"u1"}}`), "data"},
		{"next metadata of the wrong type", next, EndpointNext, ok(200, `{"data":{"id":"m1","content":"x","sender_id":"u1","metadata":"no"}}`), "data"},
		{"next bad timestamp", next, EndpointNext, ok(200, `{"data":{"id":"m1","content":"x","sender_id":"u1","inserted_at":"yesterday"}}`), "data"},
		{"me 204", me, EndpointMe, ok(204, ""), "no body"},
		{"me without id", me, EndpointMe, ok(200, `{"data":{"name":"Bot"}}`), "no id"},
		{"processing attempt 0", processing, EndpointProcessing, ok(200, `{"data":{"id":"m1","status":"processing","attempt_number":0}}`), "attempt_number"},
		{"processing without attempt", processing, EndpointProcessing, ok(200, `{"data":{"id":"m1","status":"processing"}}`), "attempt_number"},
		{"processing attempt as a string", processing, EndpointProcessing, ok(200, `{"data":{"attempt_number":"1"}}`), "data"},
		{"post without id", post, EndpointPost, ok(201, `{"data":{"success":true}}`), "no id"},
		{"post recipients of the wrong type", post, EndpointPost, ok(201, `{"data":{"id":"p1","recipients":{}}}`), "data"},
		{"chats item without id", chats, EndpointChats, ok(200, `{"data":[{"title":"x"}],"metadata":{"total_pages":1}}`), "no id"},
		{"chats data is an object", chats, EndpointChats, ok(200, `{"data":{"id":"c1"}}`), "data"},
		{"chats total_pages as a string", chats, EndpointChats, ok(200, `{"data":[],"metadata":{"total_pages":"2"}}`), "metadata"},
		{"context data not an array", contextPage, EndpointContext, ok(200, `{"data":{},"metadata":{"has_more":false}}`), "data"},
		{"context item without id", contextPage, EndpointContext, ok(200, `{"data":[`+messageJSON+`,{"content":"x","sender_id":"u"}],"metadata":{"has_more":false}}`), "data[1]: message has no id"},
		{"context item null", contextPage, EndpointContext, ok(200, `{"data":[null],"metadata":{"has_more":false}}`), "data[0]"},
		{"context without metadata", contextPage, EndpointContext, ok(200, `{"data":[]}`), "no metadata"},
		{"context without has_more", contextPage, EndpointContext, ok(200, `{"data":[],"metadata":{"next_cursor":"x"}}`), "has_more"},
		{"context has_more without cursor", contextPage, EndpointContext, ok(200, `{"data":[],"metadata":{"has_more":true,"next_cursor":null}}`), "next_cursor"},
		{"context has_more with empty cursor", contextPage, EndpointContext, ok(200, `{"data":[],"metadata":{"has_more":true,"next_cursor":""}}`), "next_cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(sequence(tt.reply))
			got, err := tt.call(t.Context(), s.client(once))
			assert.Zero(t, got, "no value alongside an error") // a typed nil pointer or slice
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.endpoint, pe.Endpoint)
			assert.Equal(t, tt.reply.status, pe.Status)
			assert.Contains(t, pe.Reason, tt.reason)
			assert.Equal(t, tt.reply.body[:min(len(tt.reply.body), MaxBodyExcerpt)], pe.Body)
			assert.Contains(t, pe.Error(), tt.endpoint)
			var apiErr *APIError
			assert.False(t, errors.As(err, &apiErr), "a 2xx is never an APIError")
		})
	}
}

func TestBodyOfExactly4MiBIsRead(t *testing.T) {
	head, tail := `{"data":{"id":"m1","sender_id":"u1","content":"`, `"}}`
	body := head + strings.Repeat("z", MaxBodyBytes-len(head)-len(tail)) + tail
	require.Len(t, body, MaxBodyBytes)
	s := newStub(sequence(ok(200, body)))
	m, err := s.client(once).Next(t.Context(), "c1")
	require.NoError(t, err)
	assert.Len(t, m.Content, MaxBodyBytes-len(head)-len(tail))
}

// When the caller's context ends, the error says why, so the shell can
// tell an interrupt from a shutdown.
func TestCancelledContextCarriesTheCause(t *testing.T) {
	errInterrupt := errors.New("interrupted")
	t.Run("cancelled before the call", func(t *testing.T) {
		for _, retry := range []RetryOptions{once, {MaxAttempts: 3}} {
			s := newStub(sequence(ok(200, agentJSON)))
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(errInterrupt)
			_, err := s.client(retry).Me(ctx)
			assert.ErrorIs(t, err, errInterrupt)
			_, err = s.client(retry).Post(ctx, "c1", "hi", nil)
			assert.ErrorIs(t, err, errInterrupt)
			assert.Empty(t, s.requests())
		}
	})
	t.Run("cancelled while the server works", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStub(func(_ int, r *http.Request) answer {
				select {
				case <-time.After(time.Hour):
				case <-r.Context().Done():
				}
				return ok(200, agentJSON)
			})
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { cancel(errInterrupt) })
			start := time.Now()
			_, err := s.client(RetryOptions{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Second}).Next(ctx, "c1")
			assert.ErrorIs(t, err, errInterrupt)
			assert.Contains(t, err.Error(), EndpointNext)
			assert.Equal(t, time.Second, time.Since(start))
			assert.Len(t, s.requests(), 1, "a cancelled request is not retried")
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStub(sequence(answer{status: 503}))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := s.client(RetryOptions{MaxAttempts: 100, BaseDelay: time.Hour, MaxDelay: time.Hour, Seed: 3}).Next(ctx, "c1")
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	})
}
