package bandonce_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// A shell whose Config.Logger is nil logs to slog.Default(); the tests and
// examples here leave it nil where logs are not what they check, so the
// default discards. Tests of the default logger swap in their own.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}
