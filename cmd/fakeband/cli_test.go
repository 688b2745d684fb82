package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// result is what one in-process run of the command gave.
type result struct {
	code           int
	stdout, stderr string
}

// runCommand runs the command in process with FAKEBAND_URL set to url.
func runCommand(url string, args ...string) result {
	var stdout, stderr strings.Builder
	getenv := func(name string) string {
		if name == "FAKEBAND_URL" {
			return url
		}
		return ""
	}
	code := run(context.Background(), args, getenv, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// served is an in-process serve, stopped by cancelling its context.
type served struct {
	stdout, stderr safebuf.Buffer
	cancel         context.CancelFunc
	code           chan int
	env            map[string]string
}

func serveInProcess(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{cancel: cancel, code: make(chan int, 1)}
	go func() { s.code <- run(ctx, args, func(string) string { return "" }, &s.stdout, &s.stderr) }()
	t.Cleanup(func() { s.stop(t) })
	eventually(t, "serve to be ready", func() bool {
		select {
		case code := <-s.code:
			s.code <- code
			t.Fatalf("serve exited with %d: %s", code, s.stderr.String())
		default:
		}
		return strings.Contains(s.stdout.String(), "fakeband: ready")
	})
	s.env = exportLines(s.stdout.String())
	return s
}

// stop cancels the serve and returns its exit code; it may be called twice.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	code := <-s.code
	s.code <- code
	return code
}

func TestServeTheExampleScenarioAndDriveItWithTheCommands(t *testing.T) {
	s := serveInProcess(t, "-scenario", "testdata/scenario.json")
	banner := s.stdout.String()
	for _, want := range []string{"(seed 42)", "human     ada", "human     bob", "agent     echo", "room      support", "room      ops",
		"members: ada (owner), echo, bob", "3 scripted message(s) are waiting on /next", "# agent echo: paste into the agent's shell"} {
		assert.Contains(t, banner, want)
	}
	url := s.env["FAKEBAND_URL"]
	require.NotEmpty(t, url)
	assert.Equal(t, url+"/api/v1", s.env["BAND_BASE_URL"])
	assert.Equal(t, "ws"+strings.TrimPrefix(url, "http")+"/api/v1/socket/websocket", s.env["BAND_WS_URL"])
	assert.Equal(t, url, s.env["BAND_REST_URL"], "the official SDKs' convention: the host root")

	var setup struct {
		Agents []struct {
			ID     string
			Name   string
			APIKey string `json:"api_key"`
		}
		Rooms []struct{ Title string }
	}
	r := runCommand(url, "setup")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &setup), r.stdout)
	require.Len(t, setup.Agents, 1)
	assert.Equal(t, s.env["BAND_API_KEY"], setup.Agents[0].APIKey, "the printed key is the agent's")
	assert.Equal(t, s.env["BAND_AGENT_ID"], setup.Agents[0].ID, "the printed id is the agent's")
	assert.Len(t, setup.Rooms, 2)

	r = runCommand(url, "faults")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"kind": "lose_response"`, "the scenario's fault is active")

	var tr truth
	r = runCommand(url, "truth")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, unwrapData(r.stdout, &tr))
	require.Len(t, tr.Rooms, 2)
	assert.Len(t, tr.Rooms[0].Posts, 2, "the script")
	assert.Len(t, tr.Rooms[1].Posts, 1)
	assert.Len(t, tr.Deliveries, 3)

	for _, args := range [][]string{
		{"say", "-room", "ops", "-from", "bob", "-mention", "echo", "hi", "there"},
		{"say", "-room", "support", "-text", "via -text", "-mention", "echo,bob"},
		{"stop", "-room", "support"},
		{"play", "-room", "support"},
		{"interrupt", "-room", "support"},
		{"interrupt", "-agent", "echo"},
		{"interrupt", "-agent", "echo", "-room", "ops"},
		{"drop", "-agent", "echo"},
		{"supersede", "-agent", "owner/echo"},
		{"add", "-room", "ops", "-participant", "ada", "-role", "admin"},
		{"remove", "-room", "ops", "-participant", "ada"},
		{"describe", "-agent", "echo", "repeats", "what", "it", "hears"},
		{"contact-add", "-agent", "echo", "-participant", "bob"},
		{"contact-remove", "-agent", "echo", "-participant", "bob"},
		{"fault", "-endpoint", "event", "-kind", "fail_before", "-nth", "1", "-status", "403", "-code", "limit_reached"},
		{"fault", "-endpoint", "me", "-kind", "fail_before", "-nth", "1", "-status", "429", "-empty-body", "-retry-after", "3"},
		{"fault", "-event", "agent.control", "-kind", "delay_push", "-probability", "0.5", "-delay", "10ms"},
		{"fault", "-plan", `{"request": [{"endpoint": "next", "kind": "stale_next", "nth": 2}]}`},
		{"rate-limit", "-per-second", "50", "-burst", "100", "-retry-after"},
	} {
		r := runCommand(url, args...)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stderr, "%v", args)
		assert.True(t, json.Valid([]byte(r.stdout)), "%v prints JSON: %s", args, r.stdout)
	}
	r = runCommand(url, "faults")
	var faults struct {
		Request   []map[string]any
		Socket    []map[string]any
		RateLimit map[string]any `json:"rate_limit"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &faults))
	require.Len(t, faults.Request, 4)
	assert.Equal(t, map[string]any{"endpoint": "me", "kind": "fail_before", "nth": float64(1), "status": float64(429), "retry_after": "3", "empty_body": true}, faults.Request[2])
	assert.Equal(t, map[string]any{"endpoint": "event", "kind": "fail_before", "nth": float64(1), "status": float64(403), "code": "limit_reached"}, faults.Request[1])
	assert.Equal(t, []map[string]any{{"event": "agent.control", "kind": "delay_push", "probability": 0.5, "delay": "10ms"}}, faults.Socket)

	assert.Equal(t, map[string]any{"per_second": 50.0, "burst": 100.0, "retry_after": true}, faults.RateLimit)

	r = runCommand(url, "clear-faults")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, `"request": []`)

	r = runCommand(url, "truth")
	require.NoError(t, unwrapData(r.stdout, &tr))
	assert.Len(t, tr.Rooms[0].Posts, 3)
	assert.Len(t, tr.Rooms[1].Posts, 2)
	var kinds []string
	for _, e := range tr.Events {
		switch e.Kind {
		case "stop", "play", "interrupt", "drop", "supersede":
			kinds = append(kinds, e.Kind)
		}
	}
	assert.Equal(t, []string{"stop", "play", "interrupt", "interrupt", "interrupt", "drop", "supersede"}, kinds)
	var ops []string
	for _, m := range tr.Rooms[1].Participants {
		ops = append(ops, m.Name)
	}
	assert.Equal(t, []string{"bob", "echo"}, ops, "ada was added to ops, then removed")

	// truth prints exactly what the admin API answers, envelope included,
	// so that jq filters written against the API work on it.
	r = runCommand(url, "truth")
	var printed, answered any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &printed))
	adminRaw(t, url, "/truth", &answered)
	assert.Equal(t, answered, printed)
	assert.Contains(t, printed, "data")

	r = runCommand(url, "say", "-room", "nowhere", "hi")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "fakeband say: 404 not_found: room \"nowhere\" not found\n", r.stderr)
	assert.Empty(t, r.stdout)

	require.Equal(t, 0, s.stop(t))
	assert.True(t, strings.HasSuffix(s.stdout.String(), "Ctrl-C stops.\n"), "stdout is the setup alone")
	assertServedQuietly(t, s.stderr.String())
}

func TestServeIsReproducibleAndSeedOverrides(t *testing.T) {
	key := func(args ...string) string {
		s := serveInProcess(t, args...)
		defer s.stop(t)
		return s.env["BAND_API_KEY"]
	}
	first, again, other := key(), key(), key("-seed", "2")
	assert.Equal(t, first, again, "the same seed gives the same keys")
	assert.NotEqual(t, first, other)
	assert.NotEmpty(t, first)
}

func TestServeRefusesBadInvocations(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"humans": [{"name": "ada"}], "rooms": [{"title": "r", "members": ["zed"]}]}`), 0o600))
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"all interfaces":   {[]string{"-addr", "0.0.0.0:0"}, `-addr "0.0.0.0:0" is not a loopback address`},
		"no host":          {[]string{"-addr", ":0"}, `-addr ":0" is not a loopback address`},
		"another machine":  {[]string{"-addr", "10.1.2.3:80"}, "is not a loopback address"},
		"no port":          {[]string{"-addr", "127.0.0.1"}, "missing port in address"},
		"missing scenario": {[]string{"-scenario", filepath.Join(dir, "none.json")}, "no such file"},
		"endless scenario": {[]string{"-scenario", "/dev/zero"}, "/dev/zero is larger than a scenario may be (8 MiB)"},
		"invalid scenario": {[]string{"-scenario", bad}, "scenario: agents: at least one agent is required\n  scenario: rooms[0].members[0]: no human or agent is named \"zed\""},
		"stray argument":   {[]string{"serve", "now"}, `unexpected argument "now"`},
		"unknown flag":     {[]string{"-port", "80"}, "flag provided but not defined: -port"},
		"unknown command":  {[]string{"shout"}, `unknown command "shout"`},
	} {
		r := runCommand("", tc.args...)
		assert.Equal(t, exitUsage, r.code, name)
		assert.Contains(t, r.stderr, tc.want, name)
		assert.Empty(t, r.stdout, name)
	}
}

func TestServeReportsABusyPort(t *testing.T) {
	s := serveInProcess(t)
	addr := strings.TrimPrefix(s.env["FAKEBAND_URL"], "http://")
	r := runCommand("", "-addr", addr)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "address already in use")
}

func TestCommandRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		url  string
		args []string
		code int
		want string
	}{
		"no server named":          {"", []string{"truth"}, exitUsage, "no server: pass -url or set FAKEBAND_URL"},
		"no server there":          {"http://127.0.0.1:1", []string{"truth"}, exitError, "is fakeband running at http://127.0.0.1:1?"},
		"say without a room":       {"http://x", []string{"say", "hi"}, exitUsage, "say needs -room and a text"},
		"say without text":         {"http://x", []string{"say", "-room", "r"}, exitUsage, "say needs -room and a text"},
		"say with text twice":      {"http://x", []string{"say", "-room", "r", "-text", "a", "b"}, exitUsage, "not both"},
		"stop without a room":      {"http://x", []string{"stop"}, exitUsage, "needs -room R"},
		"drop without an agent":    {"http://x", []string{"drop"}, exitUsage, "needs -agent A"},
		"interrupt without whom":   {"http://x", []string{"interrupt"}, exitUsage, "needs -agent A, -room R, or both"},
		"truth with an argument":   {"http://x", []string{"truth", "now"}, exitUsage, `unexpected argument "now"`},
		"fault without a kind":     {"http://x", []string{"fault", "-nth", "1"}, exitUsage, "-kind is required"},
		"fault of no kind":         {"http://x", []string{"fault", "-kind", "boom"}, exitUsage, `-kind "boom" is neither`},
		"socket fault, endpoint":   {"http://x", []string{"fault", "-kind", "lose_push", "-endpoint", "post"}, exitUsage, "-endpoint does not apply to kind lose_push"},
		"request fault, event":     {"http://x", []string{"fault", "-kind", "delay", "-event", "x"}, exitUsage, "-event does not apply to kind delay"},
		"plan and flags":           {"http://x", []string{"fault", "-plan", "{}", "-nth", "1"}, exitUsage, "-plan excludes the other fault flags"},
		"plan not JSON":            {"http://x", []string{"fault", "-plan", "{"}, exitUsage, "-plan is not valid JSON"},
		"a flag of the wrong type": {"http://x", []string{"fault", "-nth", "one"}, exitUsage, `invalid value "one" for flag -nth`},
	} {
		r := runCommand(tc.url, tc.args...)
		assert.Equal(t, tc.code, r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stderr, tc.want, name)
		assert.Empty(t, r.stdout, name)
	}
}

// unwrapData decodes the "data" of an admin API answer as printed.
func unwrapData(out string, into any) error {
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, into)
}

func TestCommandAgainstSomethingElse(t *testing.T) {
	b := fakeband.New(fakeband.Options{}) // no admin API: answers a JSON 404 without data
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	base, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	r := runCommand(strings.TrimSuffix(base, fakeband.APIPrefix), "truth")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "404 not_found")
}

// An admin answer past what a command reads is refused saying so, not
// cut and then mistaken for something that is not a fakeband.
func TestCommandRefusesAnAnswerPastItsBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"data":"`)
		_, _ = io.Copy(w, io.LimitReader(zeros{}, maxAdminAnswer))
		_, _ = io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	r := runCommand(srv.URL, "truth")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "more than 64 MiB")
	assert.NotContains(t, r.stderr, "is it a fakeband")
}

// zeros reads '0' for ever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCommand("", args...)
		assert.Equal(t, exitOK, r.code, args)
		assert.Contains(t, r.stdout, "commands:", args)
		assert.Empty(t, r.stderr, args)
	}
	r := runCommand("", "say", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "fakeband say: post a message as a human", "asked for: flag help goes where flag puts it")
	assert.Contains(t, r.stderr, "-mention")
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:0", "127.0.0.2:8080", "[::1]:0", "localhost:9000"} {
		assert.NoError(t, checkLoopback(ok), ok)
	}
	for _, bad := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.168.1.2:80", "example.com:80", "127.0.0.1"} {
		assert.Error(t, checkLoopback(bad), bad)
	}
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, "demo", shellQuote("demo"))
	assert.Equal(t, "'war room'", shellQuote("war room"))
	assert.Equal(t, `'ada'\''s'`, shellQuote("ada's"))
	assert.Equal(t, "''", shellQuote(""))
}

func TestServeHelp(t *testing.T) {
	r := runCommand("", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "-scenario file")
	assert.Empty(t, r.stdout)
}
