package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// MaxBodyBytes is the default cap on a response body, the one a Client
// has until SetMaxBodyBytes. Band's largest answer is a page of 100
// messages; a body past the cap is not read whole (it becomes a
// *TooLargeError), because reading it would only cost memory.
const MaxBodyBytes = 4 << 20

// request is one logical call, before it becomes an *http.Request.
type request struct {
	endpoint string
	method   string
	path     string // below the base URL, ids already escaped
	query    url.Values
	body     []byte // nil: no body
	retry    bool
	// skipMeasure: a body over the cap is given up on at once, unread
	// past it (its TooLargeError's Size is a lower bound).
	skipMeasure bool
	// skim: a body over the cap is read to its end for the ids a caller
	// needs to get past it (TooLargeError.Message, .Page).
	skim bool
}

// response is a 2xx answer, read in full.
type response struct {
	endpoint string
	status   int
	body     []byte
	// data and metadata are the envelope's members once decodeData ran.
	data     []byte
	metadata []byte
}

// endpointOf names req for logs: the Client's template when there is one,
// else the method and path.
func endpointOf(req *http.Request, endpoint string) string {
	if endpoint != "" {
		return endpoint
	}
	return req.Method + " " + req.URL.Path
}

// send performs r and returns its 2xx answer. Every non-2xx becomes an
// *APIError; a transport failure is returned wrapped, and when ctx is done
// the error also matches context.Cause(ctx).
func (c *Client) send(ctx context.Context, r request) (*response, error) {
	// Not every RoundTripper looks at the context before sending, and a
	// call the caller already gave up on must not reach Band.
	if ctx.Err() != nil {
		return nil, callError(ctx, r.endpoint, ctx.Err())
	}
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		// A bytes.Reader lets http.NewRequest set GetBody, so any retry
		// sends the same bytes again.
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("band: %s: %w", r.endpoint, err)
	}
	// The header in one piece, its keys already canonical: Set would
	// allocate a slice per value and canonicalise X-API-Key every time.
	// The map is NewRequest's own, still empty.
	vals := [3]string{c.key.Value(), "application/json", "application/json"}
	req.Header["X-Api-Key"], req.Header["Accept"] = vals[0:1:1], vals[1:2:2]
	if r.body != nil {
		req.Header["Content-Type"] = vals[2:3:3]
	}

	resp, err := c.doer.Do(req, r.endpoint, r.retry)
	if err != nil {
		return nil, callError(ctx, r.endpoint, err)
	}
	defer resp.Body.Close()
	limit := c.bodyLimit()
	raw, err := readBody(resp, limit)
	if err != nil {
		return nil, callError(ctx, r.endpoint, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(r.endpoint, resp, raw)
	}
	if len(raw) > limit && r.skipMeasure {
		return nil, &TooLargeError{Endpoint: r.endpoint, Cap: limit, Size: int64(len(raw)), AtLeast: true}
	}
	if len(raw) > limit {
		return nil, tooLarge(r.endpoint, resp, raw, limit, r.skim)
	}
	return &response{endpoint: r.endpoint, status: resp.StatusCode, body: raw}, nil
}

// readBody reads a body whole, up to limit and one byte more (so a longer
// body shows), as io.ReadAll of a LimitReader would; a declared length
// sizes the buffer once instead of growing it from 512 bytes.
func readBody(resp *http.Response, limit int) ([]byte, error) {
	size := min(512, limit+1)
	if n := resp.ContentLength; n >= 0 && n <= int64(limit) {
		size = int(n) + 1 // the extra byte finds EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if over := limit + 1 - len(buf); len(room) > over {
			room = room[:over]
		}
		n, err := resp.Body.Read(room)
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) > limit:
			return buf, nil
		}
	}
}

// callError names the endpoint on a failed call and, when ctx is done,
// makes sure the error matches ctx's cause, so a caller can tell an
// interrupt from a shutdown with errors.Is.
func callError(ctx context.Context, endpoint string, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("band: %s: %w: %w", endpoint, cause, err)
	}
	return fmt.Errorf("band: %s: %w", endpoint, err)
}
