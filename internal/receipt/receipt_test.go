package receipt

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTextLaysOutRowsAndTables(t *testing.T) {
	var txt Text
	txt.Line("a receipt")
	txt.Row("master seed", "%d", 7)
	txt.Row("", "%s", "continued")
	txt.Faults(map[string]int{"kill_after_apply": 12, "interrupt": 3})
	txt.RulesHeader("rules")
	txt.Rule("no-double-post", 120, 0)
	txt.RulesHeader("invariants")
	txt.Rule("quiet", 5, 1)
	var out bytes.Buffer
	n, err := txt.WriteTo(&out)
	require.NoError(t, err)
	assert.Equal(t, int64(out.Len()), n)
	assert.Equal(t, strings.Join([]string{
		"a receipt",
		"master seed          7",
		"                     continued",
		"faults triggered     (fired, not merely drawn)",
		"  interrupt                         3",
		"  kill_after_apply                 12",
		fmt.Sprintf("rules %31s %9s", "checked", "violated"), // the layout the engines had

		"  no-double-post                  120         0",
		fmt.Sprintf("invariants %26s %9s", "checked", "violated"),
		"  quiet                             5         1",
		"",
	}, "\n"), out.String())
}

func TestReadBuildSaysWhatRuns(t *testing.T) {
	b := ReadBuild()
	assert.Equal(t, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, b.GoVersion)
	assert.Equal(t, "github.com/band-once/bandonce", b.Module)
	assert.NotEmpty(t, b.Version)
	assert.NotEmpty(t, b.Revision, "\"unknown\" when the test binary has no VCS stamp")
}

func TestWriteJSONIndents(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, WriteJSON(&out, map[string]int{"b": 2, "a": 1}))
	assert.Equal(t, "{\n  \"a\": 1,\n  \"b\": 2\n}\n", out.String())
}

func TestAddCounts(t *testing.T) {
	a := map[string]int{"x": 1}
	AddCounts(a, map[string]int{"x": 2, "y": 3})
	assert.Equal(t, map[string]int{"x": 3, "y": 3}, a)
}
