// Package docs holds no code: its tests check the documentation beside
// them, README.md and docs/*.md, so that what a reader copies works.
//
//   - TestGoBlocksBuild builds every ```go block, and runs the tests among
//     them.
//   - TestRelativeLinksResolve follows every relative link to a file (and
//     to a heading, for a link with a #fragment).
//   - TestREADMEIsAFrontDoor keeps README.md at most 250 lines.
//   - TestTheReadersSeeWhatADocumentHolds checks the readers these use.
//
// go test ./... runs them, CI's race run included. They need the go
// command (go test puts it on PATH) and no network beyond the module
// proxy: the scratch module below requires what this repository
// requires, at the same versions, and -mod=mod takes its go.sum lines
// from what this repository's own build downloaded.
//
// How a ```go block is built depends on what it is:
//
//   - A whole file (it has a package clause) is a file of a package in a
//     scratch module whose go.mod requires github.com/band-once/bandonce
//     with a replace directive to this repository, exactly as a user's
//     module does while the module is unpublished (README.md, Install).
//     The whole files of one document that name the same package (a
//     package and its _test package counting as one) are one package
//     directory, so a handler and its test can be shown in two blocks. A
//     file that declares a TestXxx, BenchmarkXxx, ExampleXxx or FuzzXxx
//     function, or whose package ends in _test, is a _test.go file.
//   - Declarations without a package clause (a function, a type) are a file
//     of a package of their own.
//   - Statements are the body of func _(ctx context.Context), in a package
//     of their own: ctx is the only name they are given.
//
// A fragment's imports are added from the package names it uses (the
// fragmentImports table); a fragment that uses any other name must declare
// it. The scratch module is then built (go build), vetted (go vet) and
// tested (go test, which runs the blocks' tests: a verifier test in the
// README must pass, not only compile). Errors point at the document's own
// lines, through //line directives. Every block must also be gofmt'd.
//
// A block that cannot be made to compile (none today) is skipped only when
// the line before its fence says so, with a reason:
//
//	<!-- docs_test: not compiled: REASON -->
//
// and the test logs every block it skipped.
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// repoRoot is the repository's root, relative to this package.
const repoRoot = ".."

// documents lists README.md and docs/*.md, as paths relative to the root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(repoRoot, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 2 {
		t.Fatalf("found no docs/*.md beside README.md")
	}
	return out
}

// block is one fenced code block of a document.
type block struct {
	doc  string // the document, relative to the repository root
	line int    // the line of the block's first line of code, from 1
	lang string // the fence's info string, first word
	src  string // the code, ending in a newline
	skip string // the reason given to leave a go block uncompiled, or ""
}

func (b block) where() string { return fmt.Sprintf("%s:%d", b.doc, b.line) }

var skipMarker = regexp.MustCompile(`^<!--\s*docs_test:\s*not compiled:\s*(.*?)\s*-->$`)

// readDoc returns the content of doc, a path relative to the root.
func readDoc(t *testing.T, doc string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, doc))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// parseBlocks returns every fenced code block of doc, whose content is
// data, in order, and what is wrong with the fences.
func parseBlocks(doc string, data []byte) (blocks []block, problems []string) {
	var (
		cur      *block
		fence    string
		lastText string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				info := strings.Fields(strings.TrimLeft(trimmed, "`~"))
				cur = &block{doc: doc, line: n + 1}
				if len(info) > 0 {
					cur.lang = info[0]
				}
				if m := skipMarker.FindStringSubmatch(lastText); m != nil {
					cur.skip = m[1]
					if cur.skip == "" {
						problems = append(problems, fmt.Sprintf("%s:%d: a skip marker must give its reason", doc, n-1))
					}
				}
				continue
			}
			if trimmed != "" {
				lastText = trimmed
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			blocks = append(blocks, *cur)
			cur, lastText = nil, ""
			continue
		}
		cur.src += line + "\n"
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", doc, err))
	}
	if cur != nil {
		problems = append(problems, fmt.Sprintf("%s: the block opened at line %d is never closed", doc, cur.line-1))
	}
	return blocks, problems
}

// fragmentImports are the packages a fragment may use without importing
// them, by the name it uses.
var fragmentImports = map[string]string{
	"bandonce":       "github.com/band-once/bandonce",
	"agentloop":      "github.com/band-once/bandonce/agentloop",
	"anthropic":      "github.com/anthropics/anthropic-sdk-go/v2",
	"anthropicmodel": "github.com/band-once/bandonce/agentloop/anthropicmodel",
	"fakemodel":      "github.com/band-once/bandonce/agentloop/fakemodel",
	"band":           "github.com/band-once/bandonce/band",
	"bandonceotel":   "github.com/band-once/bandonce/otel",
	"boltledger":     "github.com/band-once/bandonce/boltledger",
	"fakeband":       "github.com/band-once/bandonce/fakeband",
	"pgledger":       "github.com/band-once/bandonce/pgledger",
	"proof":          "github.com/band-once/bandonce/proof",
	"verify":         "github.com/band-once/bandonce/verify",
	"context":        "context",
	"errors":         "errors",
	"fmt":            "fmt",
	"http":           "net/http",
	"io":             "io",
	"json":           "encoding/json",
	"log":            "log",
	"os":             "os",
	"signal":         "os/signal",
	"slog":           "log/slog",
	"strings":        "strings",
	"syscall":        "syscall",
	"testing":        "testing",
	"time":           "time",
}

// The kinds of go block.
const (
	wholeFile    = "whole file"
	declarations = "declarations"
	statements   = "statements"
)

// goFile is a go block as a file of the scratch module.
type goFile struct {
	block
	kind string
	dir  string // the package directory, relative to the scratch module
	name string // the file name
	text string // the file's content
}

// asFile classifies b and turns it into a file of the scratch module.
func asFile(b block, index int) (goFile, error) {
	fset := token.NewFileSet()
	docDir := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return '_'
	}, strings.TrimSuffix(b.doc, ".md"))
	line := fmt.Sprintf("//line %s:%d\n", b.doc, b.line)
	if f, err := parser.ParseFile(fset, b.where(), b.src, parser.ParseComments); err == nil {
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		name := fmt.Sprintf("block%d", b.line)
		if f.Name.Name != pkg || declaresTests(f) {
			name += "_test"
		}
		return goFile{block: b, kind: wholeFile, dir: docDir + "/" + pkg, name: name + ".go", text: line + b.src}, nil
	} else if strings.HasPrefix(strings.TrimSpace(stripComments(b.src)), "package ") {
		return goFile{}, fmt.Errorf("%s: %v", b.where(), err)
	}
	dir := fmt.Sprintf("%s/fragment%d", docDir, index)
	if f, err := parser.ParseFile(fset, "", "package fragment\n"+b.src, 0); err == nil {
		head := "package fragment\n\n" + importsFor(f, nil)
		return goFile{block: b, kind: declarations, dir: dir, name: "fragment.go", text: head + line + b.src}, nil
	}
	wrapped := "package fragment\n\nfunc _(ctx context.Context) {\n" + b.src + "}\n"
	f, err := parser.ParseFile(fset, "", wrapped, 0)
	if err != nil {
		return goFile{}, fmt.Errorf("%s: neither a Go file, nor declarations, nor statements: %v", b.where(), err)
	}
	head := "package fragment\n\n" + importsFor(f, []string{"context"}) + "func _(ctx context.Context) {\n"
	return goFile{block: b, kind: statements, dir: dir, name: "fragment.go", text: head + line + b.src + "}\n"}, nil
}

// stripComments drops the // comment lines at the start of src.
func stripComments(src string) string {
	for {
		s := strings.TrimLeftFunc(src, unicode.IsSpace)
		if !strings.HasPrefix(s, "//") {
			return s
		}
		_, rest, ok := strings.Cut(s, "\n")
		if !ok {
			return ""
		}
		src = rest
	}
}

// declaresTests reports whether f declares a function go test runs.
func declaresTests(f *ast.File) bool {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil {
			continue
		}
		for _, prefix := range []string{"Test", "Benchmark", "Example", "Fuzz"} {
			if strings.HasPrefix(fn.Name.Name, prefix) {
				return true
			}
		}
	}
	return false
}

// importsFor is the import declaration for the fragmentImports names f
// uses as package names, and for always.
func importsFor(f *ast.File, always []string) string {
	used := map[string]bool{}
	for _, name := range always {
		used[name] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && fragmentImports[id.Name] != "" {
				used[id.Name] = true
			}
		}
		return true
	})
	if len(used) == 0 {
		return ""
	}
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("import (\n")
	for _, name := range names {
		fmt.Fprintf(&b, "\t%s %q\n", name, fragmentImports[name])
	}
	b.WriteString(")\n\n")
	return b.String()
}

// Every go block of README.md and docs/*.md builds, passes go vet, and the
// tests among them pass, against this repository's code.
func TestGoBlocksBuild(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the documents' blocks: %v", err)
	}
	var files []goFile
	kinds := map[string]int{}
	for _, doc := range documents(t) {
		blocks, problems := parseBlocks(doc, readDoc(t, doc))
		for _, p := range problems {
			t.Error(p)
		}
		for i, b := range blocks {
			if b.lang != "go" {
				continue
			}
			if b.skip != "" {
				t.Logf("%s: not compiled, as its marker says: %s", b.where(), b.skip)
				kinds["skipped"]++
				continue
			}
			if formatted, err := format.Source([]byte(b.src)); err != nil {
				t.Errorf("%s: gofmt cannot read the block: %v", b.where(), err)
				continue
			} else if string(formatted) != b.src {
				t.Errorf("%s: the block is not gofmt'd; gofmt makes it:\n%s", b.where(), formatted)
			}
			f, err := asFile(b, i)
			if err != nil {
				t.Error(err)
				continue
			}
			files = append(files, f)
			kinds[f.kind]++
		}
	}
	if t.Failed() {
		return
	}
	if len(files) == 0 {
		t.Fatal("found no go block to build")
	}
	t.Logf("go blocks: %d whole files, %d declaration fragments, %d statement fragments, %d skipped",
		kinds[wholeFile], kinds[declarations], kinds[statements], kinds["skipped"])

	mod := t.TempDir()
	writeScratchModule(t, mod)
	for _, f := range files {
		dir := filepath.Join(mod, filepath.FromSlash(f.dir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets go fill in go.sum lines from the module cache, where
	// this repository's own build put every module the blocks use.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	for _, args := range [][]string{
		{"build", "./..."},
		{"vet", "./..."},
		{"test", "-count=1", "./..."},
	} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module of the documents' blocks failed: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "test" {
			t.Logf("go test of the blocks' tests:\n%s", out)
		}
	}
}

// writeScratchModule writes the go.mod and go.sum of a module that uses
// this repository as a user's module does before it is published: a
// require of the zero version and a replace to a directory. It requires
// every module this repository requires, at the same versions, so that
// nothing needs resolving.
func writeScratchModule(t *testing.T, dir string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module docblocks")
	text = regexp.MustCompile(`(?m)^tool .*$`).ReplaceAllString(text, "")
	text += "\nrequire github.com/band-once/bandonce v0.0.0-00010101000000-000000000000\n"
	text += "\nreplace github.com/band-once/bandonce => " + filepath.ToSlash(root) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The README is a front door; the manual lives in docs/.
func TestREADMEIsAFrontDoor(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 250 {
		t.Errorf("README.md has %d lines; keep it to 250 and move the rest into docs/", n)
	}
}

// inlineLink matches [text](target) and ![alt](target); refLink a
// reference definition, [label]: target.
var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// Every relative link in README.md and docs/*.md names a file or a
// directory of the repository, and a #fragment names a heading of the
// document it points to.
func TestRelativeLinksResolve(t *testing.T) {
	checked := 0
	for _, doc := range documents(t) {
		for _, l := range links(readDoc(t, doc)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
				if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
					t.Errorf("%s:%d: the link %q names %s, which does not exist", doc, l.line, target, file)
					continue
				}
			}
			checked++
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: the link %q has a fragment on a file that is not markdown", doc, l.line, target)
				continue
			}
			if anchors := headingAnchors(readDoc(t, file)); !slices.Contains(anchors, fragment) {
				t.Errorf("%s:%d: the link %q names no heading of %s (its anchors: %s)", doc, l.line, target, file, strings.Join(anchors, ", "))
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
	t.Logf("%d relative links resolve", checked)
}

type link struct {
	line   int
	target string
}

// links returns the links of a document outside code blocks and inline
// code.
func links(data []byte) []link {
	var out []link
	for n, line := range proseLines(data) {
		if line == "" {
			continue
		}
		line = inlineCode.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n + 1, strings.Trim(m[1], "<>")})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{n + 1, m[1]})
		}
	}
	return out
}

// proseLines returns a document's lines, with those inside fenced code
// blocks (fences included) blanked, so that line numbers still count
// from 1.
func proseLines(data []byte) []string {
	lines := strings.Split(string(data), "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// document: lower case, punctuation dropped, spaces made hyphens, and -1,
// -2, ... after a repeated one.
func headingAnchors(data []byte) []string {
	seen := map[string]int{}
	var out []string
	for _, line := range proseLines(data) {
		rest := strings.TrimLeft(line, "#")
		if level := len(line) - len(rest); level == 0 || level > 6 || !strings.HasPrefix(rest, " ") {
			continue
		}
		text := strings.TrimSpace(rest)
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", anchor, n))
		} else {
			out = append(out, anchor)
		}
		seen[anchor]++
	}
	return out
}

// The readers above see what a document holds: each kind of block, the
// skip marker, broken fences, links outside code, and GitHub's anchors.
func TestTheReadersSeeWhatADocumentHolds(t *testing.T) {
	doc := strings.Join([]string{
		"# A `Title`: here", // 1
		"",                  // 2
		"See [a](other.md#x-y) and `[not](a-link.md)`.", // 3
		"```go",     // 4
		"package p", // 5
		"```",       // 6
		"<!-- docs_test: not compiled: it shows a compiler error -->", // 7
		"```go",              // 8
		"x := undefined",     // 9
		"```",                // 10
		"~~~sh",              // 11
		"[inside](code.md)",  // 12
		"~~~",                // 13
		"## A `Title`: here", // 14
		"[ref]: ../ref.md",   // 15
		"```go",              // 16
		"func f() {}",        // 17
	}, "\n")
	blocks, problems := parseBlocks("d.md", []byte(doc))
	require.Len(t, blocks, 3)
	assert.Equal(t, []string{"d.md: the block opened at line 16 is never closed"}, problems)
	assert.Equal(t, block{doc: "d.md", line: 5, lang: "go", src: "package p\n"}, blocks[0])
	assert.Equal(t, "it shows a compiler error", blocks[1].skip)
	assert.Equal(t, "sh", blocks[2].lang)
	assert.Empty(t, blocks[2].skip, "a marker applies to the next block only")

	var targets []string
	for _, l := range links([]byte(doc)) {
		targets = append(targets, fmt.Sprintf("%d %s", l.line, l.target))
	}
	assert.Equal(t, []string{"3 other.md#x-y", "15 ../ref.md"}, targets)
	assert.Equal(t, []string{"a-title-here", "a-title-here-1"}, headingAnchors([]byte(doc)))

	kinds := map[string]string{
		"package p\n\nfunc f() {}\n":                         wholeFile,
		"func f(ctx context.Context) error { return nil }\n": declarations,
		"fmt.Println(ctx)\n":                                 statements,
	}
	for src, kind := range kinds {
		f, err := asFile(block{doc: "d.md", line: 1, lang: "go", src: src}, 0)
		require.NoError(t, err, src)
		assert.Equal(t, kind, f.kind, src)
		assert.Contains(t, f.text, "//line d.md:1\n"+src, "errors must point at the document")
	}
	f, err := asFile(block{doc: "d.md", line: 9, src: "fmt.Println(bandonce.DefaultKey(\"m\"))\n"}, 0)
	require.NoError(t, err)
	assert.Contains(t, f.text, `bandonce "github.com/band-once/bandonce"`)
	assert.Contains(t, f.text, `fmt "fmt"`)
	f, err = asFile(block{doc: "d.md", line: 9, src: "package p_test\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "d/p", f.dir)
	assert.Equal(t, "block9_test.go", f.name)
	_, err = asFile(block{doc: "d.md", line: 9, src: "package p\nfunc {\n"}, 0)
	assert.ErrorContains(t, err, "d.md:9")
}
