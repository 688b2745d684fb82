package keyguard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/keyguard"
)

// leaky is a value whose printed form quotes the key.
type leaky struct{ URL string }

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("resolved " + key) }

func TestLoggerScrubsEveryKindOfAttribute(t *testing.T) {
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := keyguard.Logger(slog.New(newHandler(&buf)), keyguard.New(key))
			log = log.With("bound", "x-api-key: "+key).WithGroup("g")
			log.Debug("message quoting "+key,
				"string", key,
				"err", fmt.Errorf("dial %q: %w", "wss://h/?api_key="+key, errors.New("refused")),
				"bytes", []byte(key),
				"struct", leaky{URL: "https://h/?k=" + key},
				"valuer", valuer{},
				slog.Group("nested", "inner", key),
				"count", 3,
			)
			out := buf.String()
			require.NotEmpty(t, out)
			assert.NotContains(t, out, "C4NARY", out)
			assert.Contains(t, out, "[redacted]")
			assert.Contains(t, out, "refused", "the rest of each value is kept")
			assert.Contains(t, out, "3")
		})
	}
}

func TestLoggerKeepsValuesWithoutTheKeyAsTheyAre(t *testing.T) {
	var got []slog.Attr
	h := &capture{attrs: &got}
	log := keyguard.Logger(slog.New(h), keyguard.New(key))
	err := errors.New("plain failure")
	log.Info("hello", "err", err)
	require.Len(t, got, 1)
	assert.Equal(t, slog.KindAny, got[0].Value.Kind())
	assert.Same(t, err, got[0].Value.Any(), "an error without the key reaches the handler unchanged")
}

func TestLoggerRespectsTheLevelAndAShortKey(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	log := keyguard.Logger(base, keyguard.New(key))
	assert.False(t, log.Enabled(t.Context(), slog.LevelInfo))
	log.Info("quiet " + key)
	assert.Empty(t, buf.String())
	assert.Same(t, base, keyguard.Logger(base, keyguard.New("k")), "nothing to scrub: the logger is returned as it is")
}

type capture struct {
	attrs *[]slog.Attr
}

func (c *capture) Enabled(_ context.Context, _ slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool { *c.attrs = append(*c.attrs, a); return true })
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }
