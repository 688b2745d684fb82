package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeband serve, as a process, refuses what a web page elsewhere in the
// developer's browser could send it: a foreign Origin (CSRF), a Host that
// is not its address (DNS rebinding: the page's own name, resolved to
// 127.0.0.1), and a body that is not JSON (a text/plain or form POST,
// which needs no preflight). Its own commands, curl and a page it serves
// itself still work.
func TestServeAdminAPIAnswersNoOtherSite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband as a process")
	}
	bin := buildBinary(t, ".", "fakeband")
	band := startFakeband(t, bin, "-addr", "127.0.0.1:0")
	root := band.env["FAKEBAND_URL"]
	host := strings.TrimPrefix(root, "http://")
	_, port, _ := strings.Cut(host, ":")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: waitFor}
	call := func(method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, root+"/_admin"+path, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	say := `{"room": "demo", "text": "from a web page"}`
	jsonType := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/json"}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}

	refused := []struct {
		what           string
		method, path   string
		body           string
		header         map[string]string
		status         int
		code, notInOut string
	}{
		{"a text/plain POST", "POST", "/say", say, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", ""},
		{"a form POST", "POST", "/say", "room=demo", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"a POST with no type", "POST", "/say", say, nil, 415, "unsupported_media_type", ""},
		{"a foreign Origin", "POST", "/say", say, with("Origin", "https://evil.example"), 403, "forbidden_origin", ""},
		{"another port's Origin", "POST", "/say", say, with("Origin", "http://127.0.0.1:1"), 403, "forbidden_origin", ""},
		{"Origin null", "POST", "/say", say, with("Origin", "null"), 403, "forbidden_origin", ""},
		{"a cross-site fetch", "GET", "/setup", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "forbidden_origin", "band_a_"},
		{"a rebound Host", "GET", "/setup", "", map[string]string{"Host": "evil.example:" + port}, 403, "forbidden_host", "band_a_"},
		{"a rebound Host without a port", "GET", "/setup", "", map[string]string{"Host": "evil.example"}, 403, "forbidden_host", "band_a_"},
		{"another port's Host", "GET", "/setup", "", map[string]string{"Host": "127.0.0.1:1"}, 403, "forbidden_host", "band_a_"},
	}
	for _, tc := range refused {
		status, out := call(tc.method, tc.path, tc.body, tc.header)
		assert.Equal(t, tc.status, status, "%s: %s", tc.what, out)
		assert.Contains(t, out, `"code":"`+tc.code+`"`, tc.what)
		if tc.notInOut != "" {
			assert.NotContains(t, out, tc.notInOut, "%s: no key in the refusal", tc.what)
		}
	}
	var tr truth
	adminGet(t, root, "/truth", &tr)
	require.NotEmpty(t, tr.Rooms)
	for _, r := range tr.Rooms {
		for _, p := range r.Posts {
			assert.NotContains(t, p.Content, "from a web page", "no refused say was applied")
		}
	}

	// What must keep working: curl and cmd/fakeband (no Origin), and a
	// page served from this address (its own Origin, a JSON body).
	status, out := call("GET", "/setup", "", nil)
	assert.Equal(t, 200, status, out)
	assert.Contains(t, out, "band_a_", "the cast's keys, for a local tool")
	status, out = call("GET", "/setup", "", map[string]string{"Host": "localhost:" + port})
	assert.Equal(t, 200, status, "localhost names the same address: %s", out)
	status, out = call("POST", "/say", say, jsonType)
	assert.Equal(t, 201, status, out)
	status, out = call("POST", "/say", say, with("Origin", root, "Sec-Fetch-Site", "same-origin"))
	assert.Equal(t, 201, status, "a same-origin page: %s", out)
	status, out = call("POST", "/say", say, with("Content-Type", "application/json; charset=utf-8"))
	assert.Equal(t, 201, status, out)
	status, out = call("DELETE", "/faults", "", nil)
	assert.Equal(t, 200, status, out)
	res := runCommand(root, "say", "-room", "demo", "-text", "from the command")
	assert.Equal(t, exitOK, res.code, "%s", res.stderr)
}
