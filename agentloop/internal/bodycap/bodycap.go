// Package bodycap bounds the answers a model adapter's SDK reads. Both
// official SDKs read an answer's body whole; the middleware here makes
// reading past the cap an error, so no answer holds more than the cap in
// memory. It is a plain func so that each SDK's option.WithMiddleware
// takes it.
package bodycap

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/band-once/bandonce"
)

// Default is the cap when the adapter's is zero: a model's answer is
// kilobytes, so 32 MiB is only ever a wrong endpoint or a broken proxy.
const Default = 32 << 20

// Middleware returns the SDK middleware that caps every answer's body at
// max bytes (Default for zero or less), for one call: make one per call.
// Reading past the cap fails with a Permanent error that names the cap
// and the endpoint: the message is given up with that reason, not called
// again and again. An SDK that retries a body whose read failed (as a
// dropped connection) gets the same error at once, without sending the
// request again: it was answered, and billed.
func Middleware(max int64) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if max <= 0 {
		max = Default
	}
	var past atomic.Pointer[capped] // the answer that went past the cap
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		if c := past.Load(); c != nil {
			return nil, c.tooLarge()
		}
		resp, err := next(req)
		if err != nil || resp.Body == nil {
			return resp, err
		}
		resp.Body = &capped{rc: resp.Body, left: max, max: max, url: req.URL.Redacted(), past: &past}
		return resp, nil
	}
}

// capped reads a body up to max bytes; a byte more is an error.
type capped struct {
	rc   io.ReadCloser
	left int64
	max  int64
	url  string
	past *atomic.Pointer[capped]
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, c.tooLarge()
	}
	if int64(len(p)) > c.left {
		p = p[:c.left+1] // one byte more tells a body past the cap
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		c.past.Store(c)
		return n + int(c.left), c.tooLarge()
	}
	return n, err
}

func (c *capped) tooLarge() error {
	return bandonce.Permanent(fmt.Errorf("the model API's answer from %s is larger than the adapter reads (%d bytes, MaxAnswerBytes)", c.url, c.max))
}

func (c *capped) Close() error { return c.rc.Close() }
