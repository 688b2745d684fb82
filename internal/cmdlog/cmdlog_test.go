package cmdlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordsAreSlogTextAtInfoOrDebug(t *testing.T) {
	var b strings.Builder
	log := New(&b, false)
	log.Debug("hidden")
	log.Info("fakeband: stopped", "n", 1)
	assert.Regexp(t, `^time=\S+ level=INFO msg="fakeband: stopped" n=1\n$`, b.String())

	b.Reset()
	New(&b, true).Debug("shown")
	assert.Contains(t, b.String(), "level=DEBUG msg=shown")
}

// Every command makes its logger here: none of their sources builds a
// slog handler of its own.
func TestTheCommandsLogThroughCmdlog(t *testing.T) {
	files, err := filepath.Glob("../../cmd/*/*.go")
	require.NoError(t, err)
	var read int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		read++
		for _, own := range []string{"slog.NewTextHandler(", "slog.NewJSONHandler(", "\t\"log\"\n"} {
			assert.NotContains(t, string(src), own, "%s builds its own logger: use cmdlog.New", f)
		}
	}
	assert.Greater(t, read, 5, "the commands' sources were found")
}
