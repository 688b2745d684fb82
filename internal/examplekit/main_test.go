package examplekit

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Serving Band, an example says its trouble on stderr without -v, and
// everything with it; playing on the fake, it says nothing without -v.
func TestAnExampleLogsItsWarningsWithoutAFlag(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name          string
		verbose, fake bool
		lowest        slog.Level // the lowest level logged
		silent        bool
	}{
		{name: "serving", lowest: slog.LevelWarn},
		{name: "serving -v", verbose: true, lowest: slog.LevelDebug},
		{name: "fake", fake: true, silent: true},
		{name: "fake -v", verbose: true, fake: true, lowest: slog.LevelDebug},
	} {
		l := Logger(c.verbose, c.fake)
		if c.silent {
			assert.False(t, l.Enabled(ctx, slog.LevelError), c.name)
			continue
		}
		assert.True(t, l.Enabled(ctx, c.lowest), c.name)
		assert.False(t, l.Enabled(ctx, c.lowest-1), c.name)
	}
}
