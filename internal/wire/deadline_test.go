package wire

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlineSeen sends one request through a deadlineTransport of timeout
// on ctx and returns the deadline the transport below saw.
func deadlineSeen(t *testing.T, ctx context.Context, timeout time.Duration) (time.Time, bool) {
	t.Helper()
	var seen time.Time
	var has bool
	dt := &deadlineTransport{timeout: timeout, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		seen, has = req.Context().Deadline()
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(""))}, nil
	})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://band.invalid/", nil)
	require.NoError(t, err)
	resp, err := dt.RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return seen, has
}

func TestARequestWithoutADeadlineGetsTheRequestTimeout(t *testing.T) {
	before := time.Now()
	d, ok := deadlineSeen(t, t.Context(), time.Minute)
	require.True(t, ok)
	assert.False(t, d.Before(before.Add(time.Minute)))
}

func TestARequestsLaterDeadlineIsCutToTheRequestTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	d, ok := deadlineSeen(t, ctx, time.Minute)
	require.True(t, ok)
	assert.True(t, d.Before(time.Now().Add(2*time.Minute)))
}

func TestARequestsEarlierDeadlineIsKeptAsItIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	d, ok := deadlineSeen(t, ctx, time.Minute)
	require.True(t, ok)
	assert.Equal(t, want, d)
}
