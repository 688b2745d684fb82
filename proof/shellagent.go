package proof

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/band-once/bandonce"
)

// ShellConfig configures the prover's own agent, a bandonce.Shell.
type ShellConfig struct {
	// MaxAttempts is the Shell's failure budget. Zero means the prover's,
	// Budget, which the oracle and the generator assume too.
	MaxAttempts int
	// DeadLetterNotice is the Shell's Config.DeadLetterNotice: nil means
	// the Shell's default notice.
	DeadLetterNotice func(bandonce.DeadLetter) string

	// deafHandler (tests): the handler works on a context no signal
	// cancels, as one that does not honour its context.
	deafHandler bool
	// forgetDeadLetters (tests): the durable ledger drops every dead
	// letter the Shell keeps.
	forgetDeadLetters bool
}

// Shell timing under the prover: short, so a schedule's virtual time
// stays small, and far apart from each other, so they do not race. Each is
// off the millisecond grid the schedules draw their durations on by an odd
// number of microseconds: two timers due in the same virtual instant fire
// in an order the scheduler picks, so a handler drawn to end exactly when
// the shutdown timeout fires would make a schedule replay two ways.
const (
	shellRequestTimeout = shellGivesUp
	shellPollInterval   = 250*time.Millisecond + 137*time.Microsecond
	shellResyncInterval = 5*time.Second + 173*time.Microsecond
	shellMarkTimeout    = 3*time.Second + 293*time.Microsecond
	shellShutdown       = 100*time.Millisecond + 59*time.Microsecond
)

// ShellAgent is the prover's default agent: a bandonce.Shell (socket on,
// small intervals, seeded jitter) whose handler does what each message's
// spec says and counts its starts and failures through External, so the
// counts survive kills. A schedule with Durable set keeps one
// MemoryLedger across its lives, reported durable (a kill loses no write
// that returned, which is what a durable store promises); every other
// schedule gets a fresh MemoryLedger every life. The durable stores
// (boltledger, pgledger) are cmd/proof's, so that this package, which
// verify imports, links neither.
func ShellAgent(cfg ShellConfig) func(*Schedule) (Factory, func()) {
	return func(s *Schedule) (Factory, func()) {
		var keep bandonce.Ledger
		if s.Durable {
			keep = &durableMemory{bandonce.NewMemoryLedger()}
			if cfg.forgetDeadLetters {
				keep = forgetful{keep.(*durableMemory)}
			}
		}
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				ledger := keep
				if ledger == nil {
					ledger = bandonce.NewMemoryLedger()
				} else if dl, ok := ledger.(bandonce.DeadLetterLedger); ok && env.External != nil {
					env.External.keeps(dl)
				}
				return RunShell(ctx, env, ledger, cfg)
			}
		}, nil
	}
}

// RunShell runs one life of the prover's Shell on ledger until ctx ends:
// the agent ShellAgent makes, for a caller that brings its own ledger.
func RunShell(ctx context.Context, env Env, ledger bandonce.Ledger, cfg ShellConfig) error {
	seed := env.Seed
	if seed == 0 {
		seed = 1
	}
	sh, err := bandonce.New(bandonce.Config{
		APIKey:           env.APIKey,
		BaseURL:          env.BaseURL,
		SocketURL:        env.SocketURL,
		HTTPClient:       env.HTTPClient,
		Handler:          specHandler(env.External, cfg.deafHandler),
		Ledger:           ledger,
		Logger:           slog.New(slog.DiscardHandler), // the storm's faults are deliberate
		MaxAttempts:      cmp.Or(cfg.MaxAttempts, Budget),
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

// forgetful is a durable ledger that keeps no dead letter (tests).
type forgetful struct{ *durableMemory }

func (forgetful) AddDeadLetter(context.Context, bandonce.DeadLetter) error { return nil }

// specHandler is SpecHandler, on a context nothing cancels when deaf.
func specHandler(x *External, deaf bool) bandonce.Handler {
	h := SpecHandler(x)
	if !deaf {
		return h
	}
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return h(context.WithoutCancel(ctx), m)
	}
}
