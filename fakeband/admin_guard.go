package fakeband

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// adminRefusal is why a request may not use the admin API, or nil. The
// admin API hands out every key and takes no credentials, so it answers
// only what can come from the developer's own tools and pages on this
// address, never a web page elsewhere in the developer's browser:
//
//   - the Host must be a loopback name or address (localhost, a name
//     under it, 127.0.0.0/8, ::1) and, on a listener, its port: a page
//     whose DNS name was rebound to 127.0.0.1 sends its own name;
//   - an Origin, when sent, must be this very origin (http, the same
//     host and port), and a Sec-Fetch-Site, when sent, same-origin or
//     none: browsers send them on every cross-origin request;
//   - every POST, and every other request with a body but GET and HEAD,
//     must carry a JSON body type, which no cross-origin page can send
//     without a preflight this API never answers (a text/plain or form
//     POST is a "simple" request that would otherwise arrive).
//
// Clients that are not browsers (curl, cmd/fakeband, a test harness)
// send neither Origin nor Sec-Fetch-Site and pass; so does a page this
// address serves, calling it with fetch and a JSON body.
func adminRefusal(r *http.Request) *Error {
	if !servedHost(r) {
		return &Error{Status: http.StatusForbidden, Code: "forbidden_host",
			Message: "the admin API answers only a loopback Host naming the address it serves"}
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return &Error{Status: http.StatusForbidden, Code: "forbidden_origin",
			Message: "the admin API answers no other origin"}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return &Error{Status: http.StatusForbidden, Code: "forbidden_origin",
			Message: "the admin API answers no other site"}
	}
	bodyless := r.ContentLength == 0 && r.Method != http.MethodPost // DELETE /faults; no browser sends one cross-origin unpreflighted
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !bodyless {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: "the admin API takes a JSON body: Content-Type: application/json"}
		}
	}
	return nil
}

// servedHost reports whether r's Host is a loopback name or address and,
// when r came through a listener, names its port.
func servedHost(r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if !loopbackName(host) {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return true // in memory: no port to compare
	}
	if port == "" {
		port = "80"
	}
	return port == strconv.Itoa(local.Port)
}

func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// sameOrigin reports whether origin is http://host, host being the
// request's Host (checked by servedHost).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Path == "" && u.User == nil && strings.EqualFold(u.Host, host)
}
