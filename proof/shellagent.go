package proof

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
)

// LedgerKind names the ledger a durable schedule keeps across lives.
type LedgerKind string

// Ledger kinds.
const (
	// LedgerMemory keeps a MemoryLedger across lives and reports it
	// durable: a kill cannot lose a write that returned, which is what a
	// durable store promises.
	LedgerMemory LedgerKind = "memory"
	// LedgerBolt keeps a boltledger file, reopened by every life.
	LedgerBolt LedgerKind = "bolt"
	// LedgerPG keeps a pgledger in PostgreSQL, under an agent id of the
	// schedule's own; every life opens it and leads under a new lease.
	LedgerPG LedgerKind = "pg"
)

// ShellConfig configures the prover's own agent, a bandonce.Shell.
type ShellConfig struct {
	// Durable is the ledger schedules with Durable set keep across
	// lives. Other schedules get a fresh MemoryLedger every life. Empty
	// means LedgerMemory.
	Durable LedgerKind
	// Dir holds the bolt files; required with LedgerBolt.
	Dir string
	// Postgres is the database URL and Schema the PostgreSQL schema of
	// the pgledgers; both required with LedgerPG. The caller drops the
	// schema when the run is over.
	Postgres, Schema string
	// MaxAttempts is the Shell's failure budget. Zero means 3.
	MaxAttempts int
	// DeadLetterNotice is the Shell's Config.DeadLetterNotice: nil means
	// the Shell's default notice.
	DeadLetterNotice func(bandonce.DeadLetter) string
}

// Shell timing under the prover: short, so a schedule's virtual time
// stays small, and far apart from each other, so they do not race. Each is
// off the millisecond grid the schedules draw their durations on by an odd
// number of microseconds: two timers due in the same virtual instant fire
// in an order the scheduler picks, so a handler drawn to end exactly when
// the shutdown timeout fires would make a schedule replay two ways.
const (
	shellRequestTimeout = 2*time.Second + 311*time.Microsecond
	shellPollInterval   = 250*time.Millisecond + 137*time.Microsecond
	shellResyncInterval = 5*time.Second + 173*time.Microsecond
	shellMarkTimeout    = 3*time.Second + 293*time.Microsecond
	shellShutdown       = 100*time.Millisecond + 59*time.Microsecond
)

var boltFiles atomic.Int64

// ShellAgent is the prover's default agent: a bandonce.Shell (socket on,
// small intervals, seeded jitter) whose handler does what each message's
// spec says and counts its starts and failures through External, so the
// counts survive kills.
func ShellAgent(cfg ShellConfig) func(*Schedule) (Factory, func()) {
	return func(s *Schedule) (Factory, func()) {
		if s.Durable && cfg.Durable == LedgerPG {
			return pgAgent(cfg), nil
		}
		var keep bandonce.Ledger
		path := ""
		if s.Durable {
			if cfg.Durable == LedgerBolt {
				path = filepath.Join(cfg.Dir, fmt.Sprintf("ledger-%d.db", boltFiles.Add(1)))
			} else {
				keep = &durableMemory{bandonce.NewMemoryLedger()}
			}
		}
		cleanup := func() {
			if path != "" {
				_ = os.Remove(path)
			}
		}
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				ledger := keep
				if path != "" {
					l, err := boltledger.Open(path, boltledger.Options{AgentID: env.AgentID})
					if err != nil {
						return err
					}
					defer l.Close()
					ledger = l
				}
				if ledger == nil {
					ledger = bandonce.NewMemoryLedger()
				}
				return runShell(ctx, env, ledger, cfg)
			}
		}, cleanup
	}
}

func runShell(ctx context.Context, env Env, ledger bandonce.Ledger, cfg ShellConfig) error {
	seed := env.Seed
	if seed == 0 {
		seed = 1
	}
	sh, err := bandonce.New(bandonce.Config{
		APIKey:           env.APIKey,
		BaseURL:          env.BaseURL,
		SocketURL:        env.SocketURL,
		HTTPClient:       env.HTTPClient,
		Handler:          SpecHandler(env.External),
		Ledger:           ledger,
		Logger:           slog.New(slog.DiscardHandler), // the storm's faults are deliberate
		MaxAttempts:      cfg.MaxAttempts,
		DeadLetterNotice: cfg.DeadLetterNotice,
		Retry:            bandonce.RetryPolicy{MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxRetryAfter: time.Second, Seed: seed},
		Backoff:          bandonce.Backoff{BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxRetryAfter: time.Second},
		RequestTimeout:   shellRequestTimeout,
		PollInterval:     shellPollInterval,
		ResyncInterval:   shellResyncInterval,
		MarkTimeout:      shellMarkTimeout,
		ShutdownTimeout:  shellShutdown,
	})
	if err != nil {
		return err
	}
	return sh.Run(ctx)
}

// SpecHandler is the prover's handler: it reads the message's spec from
// its body and does what it says, recording its start and its failures in
// ext so a later life knows how many failures are behind it.
func SpecHandler(ext *External) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := ext.Started(m.RoomID, m.ID); err != nil {
			return nil, err
		}
		defer func() { _ = ext.Ended(m.RoomID, m.ID) }()
		spec, err := ParseSpec(m.Body())
		if err != nil {
			// A plain line (MessageSpec.Text, "ok"): answered plainly.
			line, _, _ := strings.Cut(m.Body(), "\n")
			return &bandonce.Reply{Content: "done: " + line, Mentions: []string{m.SenderID}}, nil
		}
		if spec.Slow > 0 {
			t := time.NewTimer(spec.Slow)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		switch spec.Outcome {
		case NoReply:
			return nil, nil
		case PermanentFailure:
			return nil, bandonce.Permanent(errors.New("drawn permanent failure"))
		case AlwaysFail:
			return nil, errors.New("drawn failure")
		}
		failures := "failures:" + m.ID
		if ext.Count(failures) < spec.Fails {
			if _, err := ext.Effect(failures); err != nil {
				return nil, err
			}
			if spec.Outcome == PanicThenReply {
				panic("drawn panic")
			}
			return nil, errors.New("drawn failure")
		}
		return &bandonce.Reply{Content: "done: " + spec.Label, Mentions: []string{m.SenderID}, DedupKey: spec.Key}, nil
	}
}

// durableMemory is a MemoryLedger kept across lives and so durable.
type durableMemory struct{ *bandonce.MemoryLedger }

func (durableMemory) Durable() bool { return true }
