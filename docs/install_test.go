package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// README.md's install steps, run as written in a new module beside a
// "clone" (this repository, linked as ../bandonce), make a verifier test
// and the otel package build and pass there. The module is offline: the
// go commands read the module cache this repository's own build filled
// and nothing else, and build and test in Go's default -mod=readonly
// mode, so a step the README leaves out shows as the user would see it
// (missing go.sum entry).
func TestTheREADMEsInstallStepsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	steps := installSteps(t)

	work := t.TempDir()
	require.NoError(t, os.Symlink(root, filepath.Join(work, "bandonce")))
	mod := filepath.Join(work, "pager")
	require.NoError(t, os.Mkdir(mod, 0o755))
	// No GOFLAGS (so no -mod=mod to mend go.sum behind the steps' back),
	// no proxy, no checksum database: the module cache or nothing.
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOPROXY=off", "GOSUMDB=off")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s in the user's module:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	run("mod", "init", "example.com/pager")

	// The user's code: the README's verifier example, and an agent that
	// instruments its Config with the otel package.
	verifier := verifierBlocks(t)
	files := map[string]string{
		"pager.go":      verifier[0],
		"pager_test.go": verifier[1],
		"telemetry.go": `package pager

import (
	"github.com/band-once/bandonce"
	bandonceotel "github.com/band-once/bandonce/otel"
)

// Instrument sets the shell's metrics and traces on cfg.
func Instrument(cfg *bandonce.Config) error { return bandonceotel.Instrument(cfg) }
`,
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644))
	}

	for _, step := range steps {
		args := step[1:]
		if strings.Join(args, " ") == "mod tidy" {
			// Offline, tidy cannot fetch the modules that only the
			// dependencies' own tests import (the proxy serves them to a
			// user); -e lets it record everything else, which is all a
			// build and a test of this module need.
			args = append(args, "-e")
		}
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "README.md's install step %q:\n%s", strings.Join(step, " "), out)
	}
	run("build", "./...")
	run("vet", "./...")
	out := run("test", "-count=1", "./...", "github.com/band-once/bandonce/otel")
	require.Contains(t, out, "ok  \texample.com/pager", "the verifier test passed")
	require.Contains(t, out, "ok  \tgithub.com/band-once/bandonce/otel", "the otel package's tests passed")
}

// installSteps returns the commands of README.md's first sh block under
// "## Install", each split into words: go commands only, so the test
// runs nothing else a README might say.
func installSteps(t *testing.T) [][]string {
	t.Helper()
	blocks, problems := parseBlocks("README.md", readDoc(t, "README.md"))
	require.Empty(t, problems)
	section := sectionLines(t, "README.md", "## Install")
	for _, b := range blocks {
		if b.lang != "sh" || b.line < section[0] || b.line > section[1] {
			continue
		}
		var steps [][]string
		for _, line := range strings.Split(b.src, "\n") {
			line, _, _ = strings.Cut(line, "#")
			words := strings.Fields(line)
			if len(words) == 0 {
				continue
			}
			require.Equal(t, "go", words[0], "README.md:%d: an install step that is not a go command: %q", b.line, line)
			steps = append(steps, words)
		}
		require.NotEmpty(t, steps, "README.md:%d: an empty install block", b.line)
		return steps
	}
	t.Fatal("README.md has no sh block under ## Install")
	return nil
}

// verifierBlocks returns the two go blocks under README.md's "## Test it
// with the verifier": the handler's file and its verifier test's.
func verifierBlocks(t *testing.T) []string {
	t.Helper()
	blocks, _ := parseBlocks("README.md", readDoc(t, "README.md"))
	section := sectionLines(t, "README.md", "## Test it with the verifier")
	var out []string
	for _, b := range blocks {
		if b.lang == "go" && b.line > section[0] && b.line < section[1] {
			out = append(out, b.src)
		}
	}
	require.Len(t, out, 2, "README.md's verifier section shows a handler and its test")
	require.Regexp(t, regexp.MustCompile(`func Test\w+\(t \*testing\.T\)`), out[1], "the second block is the verifier test")
	return out
}

// sectionLines returns the first and last line of doc's section that
// starts with heading (up to the next heading of its level or higher).
func sectionLines(t *testing.T, doc, heading string) [2]int {
	t.Helper()
	lines := strings.Split(string(readDoc(t, doc)), "\n")
	level := strings.Index(heading, " ")
	start := -1
	for i, line := range lines {
		if start < 0 {
			if strings.TrimSpace(line) == heading {
				start = i + 1
			}
			continue
		}
		if n := strings.Index(line, " "); n > 0 && n <= level && strings.Trim(line[:n], "#") == "" {
			return [2]int{start, i}
		}
	}
	require.GreaterOrEqual(t, start, 0, "%s has no %q", doc, heading)
	return [2]int{start, len(lines)}
}
