package bandtype_test

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/bandtype"
)

func TestAnAPIErrorSaysWhatBandAnswered(t *testing.T) {
	err := fmt.Errorf("posting: %w", &bandtype.APIError{Endpoint: "POST /agent/chats/{id}/messages", Status: 422, Code: "validation_failed", Message: "mentions is required", RequestID: "req-1"})
	var apiErr *bandtype.APIError
	require.True(t, errors.As(err, &apiErr))
	assert.Equal(t, "band: POST /agent/chats/{id}/messages: 422 validation_failed: mentions is required (request req-1)", apiErr.Error())
	assert.False(t, apiErr.Transient())

	bare := &bandtype.APIError{Endpoint: "GET /agent/me", Status: http.StatusBadGateway}
	assert.Equal(t, "band: GET /agent/me: 502: Bad Gateway", bare.Error(), "no envelope: the status's own text")
	assert.True(t, bare.Transient())
	assert.True(t, (&bandtype.APIError{Status: http.StatusTooManyRequests}).Transient())
}

// A program that reads the type's fields links no more than the standard
// library for it.
func TestBandtypeLinksOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/band-once/bandonce/bandtype").Output()
	require.NoError(t, err)
	assert.Equal(t, "github.com/band-once/bandonce/bandtype", strings.TrimSpace(string(out)))
}
