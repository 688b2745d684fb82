package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// consoleJSDir holds the browser check of the console (playwright-core
// driving Debian's chromium); its node_modules are installed by npm ci
// (.ci/run does), never by the test.
const consoleJSDir = "testdata/console"

// consoleShots is where the browser check writes the console's
// screenshots when BANDONCE_CONSOLE_SCREENSHOTS is set: the images
// docs/fakeband.md shows.
const consoleShots = "../../docs/img"

// consoleViews are the screenshots the browser check takes, as
// docs/img/console-NAME.png.
var consoleViews = []string{"conversation", "stopped", "lost-response", "posted-twice", "events", "rooms", "narrow"}

// needBrowser skips the test with the reason, or fails it when
// BANDONCE_REQUIRE_BROWSER is set (as .ci/run sets it): in CI a missing
// browser is a broken CI, not a pass.
func needBrowser(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("BANDONCE_REQUIRE_BROWSER") != "" {
		t.Fatalf("%s, and BANDONCE_REQUIRE_BROWSER is set: the console was NOT checked in a browser", why)
	}
	t.Skipf("%s, so the console was NOT checked in a browser (BANDONCE_REQUIRE_BROWSER=1 turns this into a failure)", why)
}

// The console in a real headless Chromium, against fakeband and the echo
// agent as separate processes: say as ada and see echo's reply; stop, say,
// see the message held and unanswered; play and see it answered once; arm
// a lost response on the reply POST from the faults form and see one
// reply, no posted-twice badge; then a duplicate posted by hand, and the
// badge. The ground truth agrees afterwards.
func TestTheConsoleTalksToEchoInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband, echo, node and chromium as processes")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		needBrowser(t, "node is not on PATH")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		needBrowser(t, chromium+" is not installed (apt-get install chromium; CHROMIUM names another)")
	}
	if _, err := os.Stat(filepath.Join(consoleJSDir, "node_modules", "playwright-core", "package.json")); err != nil {
		needBrowser(t, "cmd/fakeband/"+consoleJSDir+"/node_modules/playwright-core is not installed (npm ci there)")
	}
	shots := ""
	if os.Getenv("BANDONCE_CONSOLE_SCREENSHOTS") != "" {
		shots, err = filepath.Abs(consoleShots)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(shots, 0o755))
	}
	fakebandBin := buildBinary(t, ".", "fakeband")
	echoBin := buildBinary(t, "../../examples/echo", "echo")
	band := startFakeband(t, fakebandBin, "-addr", "127.0.0.1:0")
	url := band.env["FAKEBAND_URL"]
	// The lost response leaves a send of unknown outcome, which echo
	// re-checks once it has settled: a short settle window keeps that short.
	echo := start(t, append(environ(band.env, "BAND_API_KEY", "BAND_BASE_URL", "BAND_WS_URL"), "BANDONCE_SETTLE_WINDOW=500ms"), echoBin)

	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	check := exec.CommandContext(ctx, node, "check.mjs")
	check.Dir = consoleJSDir
	check.Env = append(os.Environ(), "FAKEBAND_URL="+url, "CHROMIUM="+chromium, "SCREENSHOTS="+shots)
	check.WaitDelay = 10 * time.Second
	out, err := check.CombinedOutput()
	t.Logf("node check.mjs:\n%s", strings.TrimSpace(string(out)))
	require.NoError(t, err, "node check.mjs:\n%s", out)
	assert.Contains(t, string(out), "PASS: console")
	assert.NotContains(t, string(out), "FAIL")
	for _, step := range []string{
		"open the console", "say as ada, see echo's reply appear", "press stop, say again: held, nothing answered",
		"press play: answered once", "arm a lost response on the reply POST: the guard keeps one reply",
		"a reply posted twice gets the badge", "an agent's events appear in the timeline, each with its type",
		"create a room, with unread counts for the others",
		"add and remove a participant", "agent scope: stop, play, interrupt, drop the socket",
		"fail, delay and a rate limit show as armed, and clearing disarms everything",
		"every control has a label, and the page fits a narrow window",
	} {
		assert.Contains(t, string(out), "ok: "+step+"\n", "step %q", step)
	}
	if shots != "" {
		for _, v := range consoleViews {
			info, err := os.Stat(filepath.Join(shots, "console-"+v+".png"))
			if assert.NoError(t, err, "screenshot %s", v) {
				assert.False(t, info.ModTime().Before(began), "screenshot %s was written by this run", v)
			}
		}
	}

	// The ground truth: each message said through the page answered once
	// by echo, processed; the lost response fired once; the one duplicate
	// is the one posted by hand.
	var tr truth
	adminGet(t, url, "/truth", &tr)
	said := map[string]string{}
	for _, p := range tr.Rooms[0].Posts {
		if p.SenderType == "User" {
			said[p.Content[strings.Index(p.Content, "]] ")+3:]] = p.ID
		}
	}
	for text, copies := range map[string]int{"hello from the console": 1, "while stopped": 1, "lost once": 2} {
		id, ok := said[text]
		if assert.True(t, ok, "%q was said through the page", text) {
			assert.Equal(t, copies, tr.echoesOf(id), "replies to %q", text)
			assert.Equal(t, "processed", tr.status(id), "%q processed", text)
		}
	}
	assert.Equal(t, 1, tr.FaultsFired["post/lose_response"], "the lost response fired once")
	play := 0 // the room's play; the agent-scope one comes later
	for _, e := range tr.Events {
		if e.Kind == "play" && play == 0 {
			play = e.Seq
		}
	}
	require.Positive(t, play, "the page pressed play")
	for _, m := range tr.Marks {
		if m.MessageID == said["while stopped"] {
			assert.Greater(t, m.Seq, play, "mark %s on the message said while stopped came before play", m.Kind)
		}
	}

	require.NoError(t, echo.stop(t, syscall.SIGTERM), "echo exits 0 on SIGTERM; stderr: %s", echo.stderr.String())
	// echo warns of the two faults the page caused, and of nothing else:
	// the lost response, and the socket the page dropped.
	for line := range strings.Lines(echo.stderr.String()) {
		assert.Regexp(t, `level=WARN msg="(bandonce: .*outcome unknown; re-checking the room once it has settled|phoenix: disconnected)`, line)
	}
	require.NoError(t, band.stop(t, syscall.SIGTERM), "fakeband exits 0 on SIGTERM")
	assertServedQuietly(t, band.stderr.String())
}

// The screenshots docs/fakeband.md shows are committed, are PNGs, and are
// the ones the browser check takes (BANDONCE_CONSOLE_SCREENSHOTS=1 go test
// -run TestTheConsoleTalksToEchoInChromium ./cmd/fakeband rewrites them).
func TestTheDocsShowEveryConsoleScreenshot(t *testing.T) {
	doc, err := os.ReadFile("../../docs/fakeband.md")
	require.NoError(t, err)
	for _, v := range consoleViews {
		name := "console-" + v + ".png"
		data, err := os.ReadFile(filepath.Join(consoleShots, name))
		if assert.NoError(t, err, "docs/img/%s is committed", name) {
			assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), "docs/img/%s is a PNG", name)
		}
		assert.Contains(t, string(doc), "(img/"+name+")", "docs/fakeband.md shows %s", name)
	}
}

// The console adds nothing to what the library links: the root package
// links neither the fake (where the console's files are embedded) nor
// package embed. The check can fail: this command links both.
func TestTheLibraryLinksNoConsole(t *testing.T) {
	linked := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		var found []string
		for _, dep := range strings.Fields(string(out)) {
			if dep == "embed" || dep == "github.com/band-once/bandonce/fakeband" {
				found = append(found, dep)
			}
		}
		return found
	}
	assert.Empty(t, linked("github.com/band-once/bandonce"), "go list -deps of the library")
	assert.ElementsMatch(t, []string{"embed", "github.com/band-once/bandonce/fakeband"}, linked("github.com/band-once/bandonce/cmd/fakeband"))
}
