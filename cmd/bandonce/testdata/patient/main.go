// Command patient is a correct Band agent with the habits of Band's
// Python SDK that once made bandonce verify cry wolf, for its tests: it
// needs a while before its first request (an interpreter starting up:
// PATIENT_START, default 4 s), it retries on a fixed cadence (after any
// failed exchange, every request waits until PATIENT_CADENCE, default
// 60 s, has passed since the failure), and it exits 0 when another
// connection supersedes it, as it does on SIGTERM.
//
// It answers each message with "patient: <text>" under band-once's guard,
// so it never posts twice or loses a message: what bandonce verify may
// find wrong with it is the verifier's mistake.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/band-once/bandonce"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "patient:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	startup, err := duration("PATIENT_START", 4*time.Second)
	if err != nil {
		return err
	}
	cadence, err := duration("PATIENT_CADENCE", 60*time.Second)
	if err != nil {
		return err
	}
	t := time.NewTimer(startup)
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil
	}
	cfg, err := bandonce.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	cfg.HTTPClient = &http.Client{Transport: &steady{next: http.DefaultTransport, every: cadence, stop: ctx.Done()}}
	// A request may wait out a cadence before it is sent: the deadlines
	// must outlast it.
	cfg.RequestTimeout = cadence + 30*time.Second
	cfg.MarkTimeout = cadence + 30*time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Handler = func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "patient: " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: "patient:" + m.ID}, nil
	}
	shell, err := bandonce.New(cfg)
	if err != nil {
		return err
	}
	if err := shell.Run(ctx); err != nil && !errors.Is(err, bandonce.ErrSuperseded) {
		return err
	}
	return nil // stopped, or superseded: exit 0, as Band's Python SDK does
}

func duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a non-negative Go duration", name, v)
	}
	return d, nil
}

// steady holds every request that starts within every of the last
// failed exchange (an error, a 429, a 5xx) until every has passed since
// it: a client that retries on a fixed cadence. Once stop is closed (the
// process is shutting down) a held request fails at once.
type steady struct {
	next  http.RoundTripper
	every time.Duration
	stop  <-chan struct{}

	mu       sync.Mutex
	failedAt time.Time
}

func (s *steady) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	wait := time.Until(s.failedAt.Add(s.every))
	s.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, context.Cause(r.Context())
		case <-s.stop:
			t.Stop()
			return nil, errors.New("patient: shutting down")
		}
	}
	resp, err := s.next.RoundTrip(r)
	if err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		s.mu.Lock()
		s.failedAt = time.Now()
		s.mu.Unlock()
	}
	return resp, err
}
