package keyguard_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/band-once/bandonce/internal/keyguard"
)

// BenchmarkLogger is the cost the scrubbing handler adds to one Warn
// record of the shell's usual shape, to a text handler writing nowhere:
// without it, through it with nothing to scrub, and through it with the
// key in the error.
func BenchmarkLogger(b *testing.B) {
	plain := slog.New(slog.NewTextHandler(io.Discard, nil))
	clean := errors.New("band: GET /agent/chats/{id}/messages/next: 503 Service Unavailable")
	leaky := errors.New("dial wss://h/socket?api_key=" + key + ": connection refused")
	for _, bc := range []struct {
		name string
		log  *slog.Logger
		err  error
	}{
		{"plain", plain, clean},
		{"scrubbing/clean", keyguard.Logger(plain, keyguard.New(key)), clean},
		{"scrubbing/leaky", keyguard.Logger(plain, keyguard.New(key)), leaky},
		{"scrubbing/disabled-level", keyguard.Logger(slog.New(slog.DiscardHandler), keyguard.New(key)), leaky},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.log.Warn("bandonce: request failed; backing off", "room", "37be58e8-16b1-4ba9-8fc6-000000000007",
					"call", "GET /next", "err", bc.err, "wait", 1500*time.Millisecond)
			}
		})
	}
}
