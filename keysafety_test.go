package bandonce_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A Config or a Shell, printed with any verb or logged with either of
// slog's handlers, shows "[redacted]" where the key would be.
func TestPrintingAConfigOrAShellShowsNoKey(t *testing.T) {
	cfg := bandonce.Config{APIKey: canaryKey, BaseURL: "https://band.example/api/v1", Handler: echo, Rooms: []string{"r1"}}
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	// A Config in an exported field is printed by its own methods; one
	// in an unexported field fmt prints field by field, which no type can
	// prevent (docs/security.md says so). A Shell is safe either way.
	type holder struct {
		Cfg   bandonce.Config
		shell *bandonce.Shell
	}
	values := []any{cfg, &cfg, s, holder{Cfg: cfg, shell: s}}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		for _, v := range values {
			out := fmt.Sprintf(format, v)
			assertNoTrace(t, canaryKey, out)
		}
	}
	assert.Contains(t, fmt.Sprintf("%+v", cfg), "APIKey:[redacted]")
	assert.Contains(t, fmt.Sprintf("%+v", cfg), "BaseURL:https://band.example/api/v1", "the rest is still shown")
	assert.True(t, strings.HasPrefix(fmt.Sprintf("%#v", cfg), `bandonce.Config{APIKey:"[redacted]"`), fmt.Sprintf("%#v", cfg))
	assert.Contains(t, fmt.Sprintf("%+v", bandonce.Config{}), "APIKey: ", "an unset key shows as unset")

	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("configured", "config", cfg, "shell", s)
	}
	assert.Contains(t, buf.String(), "[redacted]")
	assertNoTrace(t, canaryKey, buf.String())
}

// The user's Config is not changed by New: the key is still there for
// the caller, only never shown.
func TestNewLeavesTheCallersConfigAlone(t *testing.T) {
	cfg := bandonce.Config{APIKey: canaryKey, Handler: echo}
	_, err := bandonce.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, canaryKey, cfg.APIKey)
}

// A plain http or ws URL to a host that is not loopback would send the
// key in clear: New refuses it unless InsecurePlaintext says so.
func TestPlaintextToTheNetworkNeedsTheExplicitFlag(t *testing.T) {
	refused := map[string]bandonce.Config{
		"BaseURL":           {BaseURL: "http://app.band.ai/api/v1"},
		"BaseURL (LAN)":     {BaseURL: "http://10.1.2.3:4000/api/v1"},
		"SocketURL":         {SocketURL: "ws://app.band.ai/api/v1/socket/websocket"},
		"SocketURL (by IP)": {BaseURL: "https://app.band.ai/api/v1", SocketURL: "ws://203.0.113.9/api/v1/socket/websocket"},
	}
	for name, cfg := range refused {
		t.Run(name, func(t *testing.T) {
			cfg.APIKey, cfg.Handler = canaryKey, echo
			_, err := bandonce.New(cfg)
			var ce *bandonce.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, strings.Fields(name)[0], ce.Field)
			assert.Contains(t, err.Error(), "the API key would cross the network in clear")
			assert.Contains(t, err.Error(), "InsecurePlaintext")
			assertNoTrace(t, canaryKey, err.Error())

			cfg.InsecurePlaintext = true
			_, err = bandonce.New(cfg)
			assert.NoError(t, err, "allowed when the config says so")
		})
	}
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	for _, cfg := range []bandonce.Config{
		{BaseURL: "http://127.0.0.1:4000/api/v1"},
		{BaseURL: "http://127.8.0.1:4000/api/v1"},
		{BaseURL: "http://localhost:4000/api/v1"},
		{BaseURL: "http://[::1]:4000/api/v1", SocketURL: "ws://[::1]:4000/api/v1/socket/websocket"},
		{BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient()},
		{BaseURL: "https://app.band.ai/api/v1", SocketURL: "wss://app.band.ai/api/v1/socket/websocket"},
	} {
		cfg.APIKey, cfg.Handler = canaryKey, echo
		_, err := bandonce.New(cfg)
		assert.NoError(t, err, "%s %s needs no flag", cfg.BaseURL, cfg.SocketURL)
	}
}

// A key put in a URL would be quoted by every transport error: New
// refuses it and says where the key goes instead.
func TestAKeyInAURLIsRefused(t *testing.T) {
	for field, cfg := range map[string]bandonce.Config{
		"BaseURL":   {BaseURL: "https://agent:" + canaryKey + "@app.band.ai/api/v1"},
		"SocketURL": {SocketURL: "wss://app.band.ai/api/v1/socket/websocket?api_key=" + canaryKey},
	} {
		cfg.APIKey, cfg.Handler = canaryKey, echo
		_, err := bandonce.New(cfg)
		var ce *bandonce.ConfigError
		require.ErrorAs(t, err, &ce, field)
		assert.Equal(t, field, ce.Field)
		assert.Contains(t, err.Error(), "set APIKey")
		assertNoTrace(t, canaryKey, err.Error())
	}
}
