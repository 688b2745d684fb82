package bandonce

import (
	"net/url"
	"os"
	"strings"
	"time"
)

// The environment variables ConfigFromEnv reads; docs/configuration.md has
// the table, with which of Band's conventions each follows.
const (
	envAPIKey       = "BAND_API_KEY"           // Config.APIKey (required)
	envBaseURL      = "BAND_BASE_URL"          // Config.BaseURL: the REST root, with /api/v1
	envRestURL      = "BAND_REST_URL"          // the host root, as Band's official SDKs read it
	envSocketURL    = "BAND_WS_URL"            // Config.SocketURL
	envAgentID      = "BAND_AGENT_ID"          // Config.AgentID
	envStartTimeout = "BANDONCE_START_TIMEOUT" // Config.StartTimeout, a Go duration

	envRequestTimeout = "BANDONCE_REQUEST_TIMEOUT" // Config.RequestTimeout, a Go duration
	envSettleWindow   = "BANDONCE_SETTLE_WINDOW"   // Config.SettleWindow, a Go duration
)

// envOrigin records, for each Config field ConfigFromEnv filled, the
// variable it read and the value it set.
type envOrigin map[string]envValue

type envValue struct{ name, value string }

// fieldValue is the value of a field envOrigin may record, as a string.
func (c Config) fieldValue(field string) string {
	switch field {
	case "APIKey":
		return c.APIKey
	case "BaseURL":
		return c.BaseURL
	case "SocketURL":
		return c.SocketURL
	case "AgentID":
		return c.AgentID
	case "StartTimeout":
		return c.StartTimeout.String()
	}
	return ""
}

// envVar is the variable ConfigFromEnv filled field from, or "" when it
// did not, or the caller has changed the field since.
func (c Config) envVar(field string) string {
	if c.fromEnv == nil {
		return ""
	}
	v, ok := (*c.fromEnv)[field]
	if !ok || v.value != c.fieldValue(field) {
		return ""
	}
	return v.name
}

// named is how an error names field to the user: by the variable they
// set it through, or as a Config field.
func (c Config) named(field string) string {
	if v := c.envVar(field); v != "" {
		return v
	}
	return "Config." + field
}

// whereTheRESTRootGoes says, in the terms the user set it in, what the
// base URL must be.
func (c Config) whereTheRESTRootGoes() string {
	switch c.envVar("BaseURL") {
	case envBaseURL:
		return envBaseURL + " is the REST root, ending in " + restPath + " (" + envRestURL + " is the host root)"
	case envRestURL:
		return envRestURL + " is the host root, to which the shell adds " + restPath + " (" + envBaseURL + " is the REST root, with it)"
	}
	return "Config.BaseURL is the REST root, ending in " + restPath + " (" + envBaseURL + " to ConfigFromEnv; " + envRestURL + " is the host root)"
}

// invalid is the *ConfigError for field.
func (c Config) invalid(field, reason string) *ConfigError {
	return &ConfigError{Field: field, Var: c.envVar(field), Reason: reason}
}

// restPath is where Band serves its agent REST API below the host root.
const restPath = "/api/v1"

// EnvError reports an environment variable ConfigFromEnv cannot use. It
// never quotes the variable's value whole: a URL may carry a credential.
type EnvError struct {
	// Var names the variable, such as "BAND_BASE_URL".
	Var string
	// Reason says what is wrong with it and what to set instead.
	Reason string
}

func (e *EnvError) Error() string { return "bandonce: " + e.Var + ": " + e.Reason }

// ConfigFromEnv returns a Config filled from the environment, read through
// getenv (nil means os.Getenv), for an agent whose settings come from the
// lines `fakeband` prints or a deployment's secrets. It reads:
//
//   - BAND_API_KEY: the agent's key. Required.
//   - BAND_BASE_URL: the REST root, ending in /api/v1, as band-once and
//     curl read it; or BAND_REST_URL: the host root, as Band's official
//     Python and TypeScript SDKs read it (the shell adds /api/v1). Either
//     or both may be set; both must then name the same place. Neither
//     means DefaultBaseURL.
//   - BAND_WS_URL: the Phoenix socket, with or without the trailing
//     /websocket (the TypeScript SDK drops it). Unset means derived from
//     the REST root.
//   - BAND_AGENT_ID: the agent's id, checked against Band's answer at
//     start (Config.AgentID). Unset means not checked.
//   - BANDONCE_START_TIMEOUT: Config.StartTimeout, as a Go duration such
//     as 30s. Unset means the default.
//   - BANDONCE_REQUEST_TIMEOUT and BANDONCE_SETTLE_WINDOW:
//     Config.RequestTimeout and Config.SettleWindow, as Go durations.
//     Unset means the defaults.
//
// Empty variables count as unset. The Handler, and every field the
// environment does not name, are left for the caller to set; New checks
// the rest. Errors are *EnvError and name the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var c Config
	if c.APIKey = get(envAPIKey); c.APIKey == "" {
		return Config{}, &EnvError{Var: envAPIKey, Reason: "not set: export the agent's API key"}
	}
	base, err := restRoot(get(envBaseURL), get(envRestURL))
	if err != nil {
		return Config{}, err
	}
	c.BaseURL = base
	if ws := get(envSocketURL); ws != "" {
		u, err := parseURL(envSocketURL, ws, "ws", "wss")
		if err != nil {
			return Config{}, err
		}
		if strings.HasSuffix(u.Path, "/socket") {
			u.Path += "/websocket" // phoenix.js's form: it adds /websocket itself
		}
		c.SocketURL = u.String()
	}
	c.AgentID = get(envAgentID)
	for _, d := range []struct {
		name string
		into *time.Duration
	}{{envStartTimeout, &c.StartTimeout}, {envRequestTimeout, &c.RequestTimeout}, {envSettleWindow, &c.SettleWindow}} {
		if err := durationVar(d.name, get(d.name), d.into); err != nil {
			return Config{}, err
		}
	}
	origin := envOrigin{"APIKey": {envAPIKey, c.APIKey}}
	switch {
	case get(envBaseURL) != "":
		origin["BaseURL"] = envValue{envBaseURL, c.BaseURL}
	case c.BaseURL != "":
		origin["BaseURL"] = envValue{envRestURL, c.BaseURL}
	}
	if c.SocketURL != "" {
		origin["SocketURL"] = envValue{envSocketURL, c.SocketURL}
	}
	if c.AgentID != "" {
		origin["AgentID"] = envValue{envAgentID, c.AgentID}
	}
	if c.StartTimeout != 0 {
		origin["StartTimeout"] = envValue{envStartTimeout, c.StartTimeout.String()}
	}
	c.fromEnv = &origin
	return c, nil
}

// durationVar reads a positive Go duration from the variable named name
// into into; an empty value leaves it alone.
func durationVar(name, v string, into *time.Duration) error {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return &EnvError{Var: name, Reason: "want a positive Go duration such as 30s or 2m, not " + quote(v)}
	}
	*into = d
	return nil
}

// restRoot reconciles BAND_BASE_URL and BAND_REST_URL into the REST root.
func restRoot(base, rest string) (string, error) {
	var fromBase, fromRest, shownBase, shownRest string
	if base != "" {
		u, err := parseURL(envBaseURL, base, "http", "https")
		if err != nil {
			return "", err
		}
		if strings.Trim(u.Path, "/") == "" {
			return "", &EnvError{Var: envBaseURL, Reason: "is a host root (" + origin(u) + "); it is the REST root, with " + restPath +
				" (" + origin(u) + restPath + "); a host root goes in " + envRestURL}
		}
		fromBase, shownBase = strings.TrimRight(u.String(), "/"), shown(u)
	}
	if rest != "" {
		u, err := parseURL(envRestURL, rest, "http", "https")
		if err != nil {
			return "", err
		}
		if strings.HasSuffix(strings.TrimRight(u.Path, "/"), restPath) {
			return "", &EnvError{Var: envRestURL, Reason: "ends in " + restPath + ": it is the host root, as Band's SDKs read it (" +
				origin(u) + "); the REST root goes in " + envBaseURL}
		}
		fromRest, shownRest = strings.TrimRight(u.String(), "/")+restPath, shown(u)+restPath
	}
	switch {
	case fromBase != "" && fromRest != "" && fromBase != fromRest:
		return "", &EnvError{Var: envBaseURL, Reason: "and " + envRestURL + " name different places: the REST root " + shownBase +
			" and the host root's " + shownRest + "; unset one of them"}
	case fromBase != "":
		return fromBase, nil
	}
	return fromRest, nil
}

// parseURL parses an absolute URL of one of schemes, or says which
// variable is wrong without quoting a value that may hold a credential.
func parseURL(name, raw string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != schemes[0] && u.Scheme != schemes[1]) {
		return nil, &EnvError{Var: name, Reason: "want an absolute " + schemes[0] + "(s) URL such as " + schemes[1] + "://host" + examplePath(name)}
	}
	return u, nil
}

func examplePath(name string) string {
	switch name {
	case envBaseURL:
		return restPath
	case envSocketURL:
		return restPath + "/socket/websocket"
	}
	return ""
}

// origin is scheme://host of u, without anything that could be a secret.
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// shown is u without its user info, query and fragment, for a message.
func shown(u *url.URL) string { return origin(u) + strings.TrimRight(u.EscapedPath(), "/") }

func quote(s string) string { return `"` + s + `"` }
