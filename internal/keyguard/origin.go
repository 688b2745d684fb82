package keyguard

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// ErrCrossOriginRedirect is wrapped by the error a client from
// SameOriginRedirects returns for a redirect it refused to follow.
var ErrCrossOriginRedirect = errors.New("refused a redirect to another origin: the API key would go with it")

// maxRedirects is net/http's own limit, kept when the client had no
// CheckRedirect of its own.
const maxRedirects = 10

// SameOriginRedirects returns a copy of hc (nil means http.DefaultClient)
// that follows a redirect only to the first request's own scheme, host and
// port. net/http copies every header but Authorization and Cookie to
// wherever a Location points, X-API-Key included, so a redirect to another
// host (or from https to http) would hand it the key. A refused redirect
// is an error wrapping ErrCrossOriginRedirect; it names both origins but
// never a path or query. hc's own CheckRedirect still decides the rest.
func SameOriginRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !sameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("%w (from %s to %s)", ErrCrossOriginRedirect, origin(via[0].URL), origin(req.URL))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &c
}

// sameOrigin compares scheme, host and port, with the scheme's default
// port filled in. The WebSocket dialer has already turned ws(s) into
// http(s) by the time a redirect is checked.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

// origin is scheme://host[:port], nothing a server could have put a key in
// beyond the host name itself.
func origin(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// InClear reports whether a request to u would carry the key across a
// network unencrypted: a plain http or ws URL whose host is not a loopback
// address (127.0.0.0/8, ::1) or a loopback name (localhost and the names
// under it, which RFC 6761 reserves for loopback; the fake Band's
// in-memory host is one).
func InClear(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		return !local(u.Hostname())
	}
	return false
}

func local(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// KeyInURL reports whether u carries a credential of its own: user
// information, or the api_key query parameter Band's socket once took.
// Errors from net/http and the WebSocket dialer quote the URL they were
// given, so a key there would be in every one of them.
func KeyInURL(u *url.URL) bool {
	if u.User != nil {
		return true
	}
	for name := range u.Query() {
		if strings.EqualFold(name, "api_key") {
			return true
		}
	}
	return false
}
