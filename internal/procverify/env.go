package procverify

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// sdkPrefixes name the variables Band's SDKs read: BAND_* (both SDKs,
// and the Python SDK's BAND_LOG_* settings) and THENVOI_*, the legacy
// names the TypeScript SDK still falls back to (THENVOI_API_KEY,
// THENVOI_AGENT_ID, THENVOI_REST_URL, THENVOI_WS_URL among them).
var sdkPrefixes = []string{"BAND_", "THENVOI_"}

// Withheld is one variable of the verifier's own environment that the
// agent does not get, by name (never its value), and why.
type Withheld struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Reasons a variable is withheld.
const (
	WithheldSDK = "a Band SDK variable: a real key or URL must not reach the agent under test"
	WithheldURL = "a URL off loopback: the agent under test must reach nothing but the fake"
)

// agentBase is the environment an agent under test inherits from the
// verifier: environ without any variable a Band SDK reads and without any
// whose value is a URL to a host other than loopback (a real Band, a
// proxy, an API the agent would call with real credentials during a
// storm), and the names it withheld.
func agentBase(environ []string) (env []string, withheld []Withheld) {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case slices.ContainsFunc(sdkPrefixes, func(p string) bool { return strings.HasPrefix(strings.ToUpper(name), p) }):
			withheld = append(withheld, Withheld{Name: name, Reason: WithheldSDK})
		case offLoopbackURL(value):
			withheld = append(withheld, Withheld{Name: name, Reason: WithheldURL})
		default:
			env = append(env, kv)
		}
	}
	slices.SortFunc(withheld, func(a, b Withheld) int { return strings.Compare(a.Name, b.Name) })
	return env, withheld
}

// offLoopbackURL reports whether value is an absolute URL of a network
// scheme whose host is not loopback (127.0.0.0/8, ::1, localhost and the
// names under it), or a comma- or space-separated list holding one.
func offLoopbackURL(value string) bool {
	for _, f := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
		u, err := url.Parse(strings.TrimSpace(f))
		if err != nil || u.Host == "" {
			continue
		}
		switch strings.ToLower(u.Scheme) {
		case "http", "https", "ws", "wss", "socks5", "socks5h", "grpc", "grpcs":
		default:
			continue
		}
		if !loopbackHost(u.Hostname()) {
			return true
		}
	}
	return false
}

func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
