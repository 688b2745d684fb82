package bandonce_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// Both conventions fakeband prints lead to the same Config: band-once's
// REST root and the official SDKs' host root.
func TestConfigFromEnvReadsBothConventions(t *testing.T) {
	const key = "band_a_0123456789abcdef"
	want := bandonce.Config{
		APIKey:    key,
		BaseURL:   "http://127.0.0.1:8787/api/v1",
		SocketURL: "ws://127.0.0.1:8787/api/v1/socket/websocket",
		AgentID:   "d1770797-e4d9-4177-8b65-000000000005",
	}
	for name, vars := range map[string]map[string]string{
		"band-once's REST root": {"BAND_BASE_URL": "http://127.0.0.1:8787/api/v1"},
		"the SDKs' host root":   {"BAND_REST_URL": "http://127.0.0.1:8787"},
		"both, agreeing":        {"BAND_BASE_URL": "http://127.0.0.1:8787/api/v1/", "BAND_REST_URL": "http://127.0.0.1:8787/"},
		"phoenix.js's socket":   {"BAND_BASE_URL": "http://127.0.0.1:8787/api/v1", "BAND_WS_URL": "ws://127.0.0.1:8787/api/v1/socket"},
	} {
		t.Run(name, func(t *testing.T) {
			vars["BAND_API_KEY"] = " " + key + "\n" // as $(cat keyfile) leaves it
			vars["BAND_AGENT_ID"] = want.AgentID
			if vars["BAND_WS_URL"] == "" {
				vars["BAND_WS_URL"] = want.SocketURL
			}
			cfg, err := bandonce.ConfigFromEnv(envOf(vars))
			require.NoError(t, err)
			assert.Equal(t, want.APIKey, cfg.APIKey)
			assert.Equal(t, want.BaseURL, cfg.BaseURL)
			assert.Equal(t, want.SocketURL, cfg.SocketURL)
			assert.Equal(t, want.AgentID, cfg.AgentID)
		})
	}
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := bandonce.ConfigFromEnv(envOf(map[string]string{"BAND_API_KEY": "k"}))
	require.NoError(t, err)
	assert.Empty(t, cfg.BaseURL, "New applies DefaultBaseURL")
	assert.Empty(t, cfg.SocketURL, "New derives the socket from the REST root")
	assert.Empty(t, cfg.AgentID)
	assert.Zero(t, cfg.StartTimeout)

	cfg, err = bandonce.ConfigFromEnv(envOf(map[string]string{"BAND_API_KEY": "k", "BANDONCE_START_TIMEOUT": "45s"}))
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, cfg.StartTimeout)
}

// Every mistake is named by its variable, says what to set instead, and
// never quotes a value that could hold a secret.
func TestConfigFromEnvErrorsNameTheVariable(t *testing.T) {
	const secret = "s3cr3t-in-a-url"
	for name, tc := range map[string]struct {
		vars    map[string]string
		varName string
		says    string
	}{
		"no key":    {map[string]string{}, "BAND_API_KEY", "not set"},
		"blank key": {map[string]string{"BAND_API_KEY": "  "}, "BAND_API_KEY", "not set"},
		"host root as base": {map[string]string{"BAND_BASE_URL": "http://127.0.0.1:8787"}, "BAND_BASE_URL",
			"http://127.0.0.1:8787/api/v1"},
		"REST root as host root": {map[string]string{"BAND_REST_URL": "https://app.band.ai/api/v1"}, "BAND_REST_URL",
			"goes in BAND_BASE_URL"},
		"disagreeing roots": {map[string]string{"BAND_BASE_URL": "http://a.test/api/v1", "BAND_REST_URL": "http://b.test"},
			"BAND_BASE_URL", "http://b.test/api/v1"},
		"relative base":   {map[string]string{"BAND_BASE_URL": "localhost:8787/api/v1"}, "BAND_BASE_URL", "absolute http(s) URL"},
		"ws scheme base":  {map[string]string{"BAND_BASE_URL": "ws://" + secret + "@h/api/v1"}, "BAND_BASE_URL", "absolute http(s) URL"},
		"http socket":     {map[string]string{"BAND_WS_URL": "http://h/api/v1/socket/websocket"}, "BAND_WS_URL", "ws(s)"},
		"bad duration":    {map[string]string{"BANDONCE_START_TIMEOUT": "90"}, "BANDONCE_START_TIMEOUT", "Go duration"},
		"zero duration":   {map[string]string{"BANDONCE_START_TIMEOUT": "0s"}, "BANDONCE_START_TIMEOUT", "positive"},
		"credential host": {map[string]string{"BAND_BASE_URL": "https://u:" + secret + "@h"}, "BAND_BASE_URL", "host root"},
	} {
		t.Run(name, func(t *testing.T) {
			if name != "no key" && name != "blank key" {
				tc.vars["BAND_API_KEY"] = "k"
			} else if name == "blank key" {
				tc.vars["BAND_API_KEY"] = "  "
			}
			_, err := bandonce.ConfigFromEnv(envOf(tc.vars))
			var envErr *bandonce.EnvError
			require.True(t, errors.As(err, &envErr), "%v", err)
			assert.Equal(t, tc.varName, envErr.Var)
			assert.Contains(t, err.Error(), tc.varName)
			assert.Contains(t, err.Error(), tc.says)
			assert.NotContains(t, err.Error(), secret)
		})
	}
}

// What ConfigFromEnv returns is a Config New accepts once the caller adds
// the Handler; a plain URL to the network is still refused there.
func TestConfigFromEnvFeedsNew(t *testing.T) {
	cfg, err := bandonce.ConfigFromEnv(envOf(map[string]string{"BAND_API_KEY": "k", "BAND_REST_URL": "http://127.0.0.1:9"}))
	require.NoError(t, err)
	_, err = bandonce.New(cfg)
	var cfgErr *bandonce.ConfigError
	require.ErrorAs(t, err, &cfgErr, "no Handler yet")
	assert.Equal(t, "Handler", cfgErr.Field)
	cfg.Handler = echo
	_, err = bandonce.New(cfg)
	require.NoError(t, err)

	cfg, err = bandonce.ConfigFromEnv(envOf(map[string]string{"BAND_API_KEY": "k", "BAND_REST_URL": "http://band.example"}))
	require.NoError(t, err)
	cfg.Handler = echo
	_, err = bandonce.New(cfg)
	require.ErrorAs(t, err, &cfgErr)
	assert.True(t, strings.Contains(err.Error(), "in clear"), err.Error())
}

// An error about a field ConfigFromEnv filled names the variable the user
// set, not the Config field they never saw; a field the caller changed
// afterwards is named as a field again.
func TestConfigErrorsNameTheVariableTheUserSet(t *testing.T) {
	echo := func(context.Context, *bandonce.Message) (*bandonce.Reply, error) { return nil, nil }
	newFrom := func(vars map[string]string, change func(*bandonce.Config)) error {
		vars["BAND_API_KEY"] = "band_a_0123456789abcdef"
		cfg, err := bandonce.ConfigFromEnv(envOf(vars))
		require.NoError(t, err)
		cfg.Handler = echo
		if change != nil {
			change(&cfg)
		}
		_, err = bandonce.New(cfg)
		return err
	}
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		change func(*bandonce.Config)
		field  string
		varSet string
		says   string
	}{
		{"the REST root", map[string]string{"BAND_BASE_URL": "http://band.example.com/api/v1"}, nil,
			"BaseURL", "BAND_BASE_URL", "bandonce: invalid BAND_BASE_URL (Config.BaseURL): plain http"},
		{"the host root", map[string]string{"BAND_REST_URL": "http://band.example.com"}, nil,
			"BaseURL", "BAND_REST_URL", "bandonce: invalid BAND_REST_URL (Config.BaseURL): plain http"},
		{"the socket", map[string]string{"BAND_WS_URL": "ws://band.example.com/api/v1/socket/websocket"}, nil,
			"SocketURL", "BAND_WS_URL", "bandonce: invalid BAND_WS_URL (Config.SocketURL): plain ws"},
		{"changed by the caller", map[string]string{"BAND_BASE_URL": "https://band.example.com/api/v1"},
			func(c *bandonce.Config) { c.BaseURL = "http://other.example.com/api/v1" },
			"BaseURL", "", "bandonce: invalid Config.BaseURL: plain http"},
	} {
		err := newFrom(tc.vars, tc.change)
		var cfgErr *bandonce.ConfigError
		require.ErrorAs(t, err, &cfgErr, tc.name)
		assert.Equal(t, tc.field, cfgErr.Field, tc.name)
		assert.Equal(t, tc.varSet, cfgErr.Var, tc.name)
		assert.True(t, strings.HasPrefix(err.Error(), tc.says), "%s: %s", tc.name, err)
	}
}
