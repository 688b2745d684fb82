package bandonce_test

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/bandtype"
)

// The shell's APIError and the client's are two names of one error:
// whichever type an error was made as, errors.As fills a target of either,
// with every field, pointing to the same error.
func TestErrorsAsReadsAnAPIErrorUnderEveryName(t *testing.T) {
	fields := bandtype.APIError{Endpoint: "POST /agent/chats/{id}/messages", Status: 429, Code: "rate_limited",
		Message: "slow down", RequestID: "req-1", Details: map[string][]string{"/x": {"bad"}}, RetryAfter: 3 * time.Second, Body: "b"}
	clientMade := fields
	shellMade := bandonce.APIError(fields)
	for name, made := range map[string]error{"made as bandtype.APIError": &clientMade, "made as bandonce.APIError": &shellMade} {
		t.Run(name, func(t *testing.T) {
			err := fmt.Errorf("posting: %w", made)

			var shell *bandonce.APIError
			require.True(t, errors.As(err, &shell), "as *bandonce.APIError")
			assert.Equal(t, fields, bandtype.APIError(*shell))

			var client *band.APIError
			require.True(t, errors.As(err, &client), "as *band.APIError")
			assert.Equal(t, fields, *client)

			var leaf *bandtype.APIError
			require.True(t, errors.As(err, &leaf), "as *bandtype.APIError")
			assert.Equal(t, fields, *leaf)

			shell.Status = 503 // one error: a change shows under every name
			assert.Equal(t, 503, client.Status)
			assert.True(t, leaf.Transient())
			assert.Equal(t, made.Error(), shell.Error())
			assert.Equal(t, client.Error(), shell.Error())

			var other *bandonce.ConfigError
			assert.False(t, errors.As(err, &other), "no other type is filled")
		})
	}
}

// go doc of the root package shows APIError's fields, not an alias line.
func TestGoDocShowsTheFieldsOfAPIError(t *testing.T) {
	out, err := exec.Command("go", "doc", "github.com/band-once/bandonce", "APIError").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "type APIError struct {")
	for _, field := range []string{"Endpoint string", "Status int", "RequestID string", "Details map[string][]string", "RetryAfter time.Duration", "Body string"} {
		assert.Contains(t, string(out), "\t"+field, "go doc shows field %s", field)
	}
}
