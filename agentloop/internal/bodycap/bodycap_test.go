package bodycap

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// read runs body through the middleware with cap max and reads it whole.
func read(t *testing.T, max int64, body string) (string, error) {
	t.Helper()
	req := &http.Request{URL: &url.URL{Scheme: "https", Host: "api.example", Path: "/v1/messages"}}
	resp, err := Middleware(max)(req, func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return string(got), err
}

// An answer up to the cap is read whole; a byte more is a Permanent
// error naming the cap, with no more than the cap read; any cap, up to
// the largest, is taken.
func TestTheCapIsExact(t *testing.T) {
	got, err := read(t, 5, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", got)

	got, err = read(t, 5, "hello!")
	require.Error(t, err)
	var permanent *bandonce.PermanentError
	assert.True(t, errors.As(err, &permanent), "%v", err)
	assert.Contains(t, err.Error(), "5 bytes")
	assert.Equal(t, "hello", got)

	for _, max := range []int64{math.MaxInt64, math.MaxInt64 - 1, 0, -1} {
		got, err := read(t, max, "hello")
		require.NoError(t, err, "cap %d", max)
		assert.Equal(t, "hello", got, "cap %d", max)
	}
}
