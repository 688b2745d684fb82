package wire

import (
	"context"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Try is one attempt of a request, as RetryOptions.Observe sees it.
type Try struct {
	// Endpoint is the call's templated name (EndpointNext, ...).
	Endpoint string
	// Attempt counts the call's tries from 1.
	Attempt int
	// Status is the answer's HTTP status, 0 when none came.
	Status int
	// Took is the time until the answer's headers, or the failure.
	Took time.Duration
	// Err is why no answer came; nil when Status is set.
	Err error
}

// observe reports one try to o.Observe, if set.
func (d *retryDoer) observe(ctx context.Context, endpoint string, attempt int, began time.Time, resp *http.Response, err error) {
	if d.opts.Observe == nil {
		return
	}
	t := Try{Endpoint: endpoint, Attempt: attempt, Took: time.Since(began), Err: err}
	if resp != nil {
		t.Status = resp.StatusCode
	}
	d.opts.Observe(ctx, t)
}

// tryClock times the try in flight of one retried call.
type tryClock struct {
	began  time.Time
	try    int // from 1
	offset int // tries sent before the retrying client's first
}

func (c *tryClock) start(_ retryablehttp.Logger, _ *http.Request, n int) {
	c.began, c.try = time.Now(), n+1+c.offset
}
