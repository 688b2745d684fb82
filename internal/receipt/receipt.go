// Package receipt is what the receipts of the two kill-storm engines
// share, package proof's and internal/procverify's (bandonce verify): what
// was built, the text layout of their tables, and their JSON form. Each
// engine keeps its own Report type and says what goes in it.
package receipt

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// Build says what was built: the Go toolchain and platform, and the main
// module with its version and VCS revision, or "unknown" where the binary
// does not say (go run stamps no version; go test no revision).
type Build struct {
	// GoVersion is the toolchain and platform, e.g. "go1.26.0 linux/amd64".
	GoVersion string
	// Module is the main module's path; Version its version.
	Module, Version string
	// Revision is the VCS revision; Modified says the work tree had
	// changes the revision does not hold.
	Revision string
	Modified bool
}

// ReadBuild reads the running binary's build information.
func ReadBuild() Build {
	b := Build{
		GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Module:    "github.com/band-once/bandonce", Version: "unknown", Revision: "unknown",
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// Text lays out a receipt as text: rows of a 21-column key and its value,
// and tables of counts.
type Text struct {
	b strings.Builder
}

// Row writes one row: key, padded, then the value.
func (t *Text) Row(key, format string, args ...any) {
	fmt.Fprintf(&t.b, "%-21s%s\n", key, fmt.Sprintf(format, args...))
}

// Line writes a line as it is.
func (t *Text) Line(s string) { t.b.WriteString(s + "\n") }

// Faults writes the table of the faults that fired, by name.
func (t *Text) Faults(fired map[string]int) {
	t.Line("faults triggered     (fired, not merely drawn)")
	for _, k := range slices.Sorted(maps.Keys(fired)) {
		fmt.Fprintf(&t.b, "  %-27s%8d\n", k, fired[k])
	}
}

// RulesHeader starts the table of the rules judged, titled title (the
// engine's word for them): its columns are checked and violated.
func (t *Text) RulesHeader(title string) {
	fmt.Fprintf(&t.b, "%s %*s %9s\n", title, 36-len(title), "checked", "violated")
}

// Rule writes one row of the rules' table.
func (t *Text) Rule(name string, checked, violated int) {
	fmt.Fprintf(&t.b, "  %-27s%8d %9d\n", name, checked, violated)
}

// WriteTo writes the receipt laid out so far to w.
func (t *Text) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, t.b.String())
	return int64(n), err
}

// WriteJSON writes a receipt as indented JSON.
func WriteJSON(w io.Writer, receipt any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(receipt)
}

// AddCounts adds b's counts to a's.
func AddCounts[K comparable](a, b map[K]int) {
	for k, n := range b {
		a[k] += n
	}
}
