package band_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/safebuf"
)

// An answer Band marks deprecated is logged once per endpoint, with its
// sunset, however often the call is made; /agent/me's feature flags reach
// the caller.
func TestADeprecatedCallIsLoggedOnceAndFeatureFlagsAreRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Sunset", "Thu, 01 Oct 2026 00:00:00 GMT")
		_, _ = w.Write([]byte(`{"data":{"id":"a1","name":"A","handle":"o/a","owner_uuid":"o1","feature_flags":{"memories_v2":true}}}`))
	}))
	defer srv.Close()
	var logs safebuf.Buffer
	c, err := band.New(band.Config{APIKey: "k", BaseURL: srv.URL + "/api/v1", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	for range 3 {
		me, err := c.Me(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"memories_v2": true}, me.FeatureFlags)
	}
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "deprecated"), out)
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, `endpoint="GET /agent/me"`)
	assert.Contains(t, out, `sunset="Thu, 01 Oct 2026 00:00:00 GMT"`)
}
