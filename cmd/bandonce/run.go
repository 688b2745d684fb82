package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/bridge"
	"github.com/band-once/bandonce/internal/cmdlog"
	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/procgroup"
)

type runOptions struct {
	argv      []string
	forward   string
	cancelURL string
	key       string
	grace     time.Duration
	timeout   time.Duration
	attempts  int
	backoff   bandonce.Backoff
	ledger    string
	once      bool
	verbose   bool
	env       []string
	passKey   bool
}

func parseRun(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := flag.NewFlagSet("bandonce run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: bandonce run [flags] -- <command> [args...]
       bandonce run -forward https://host/path [flags]

Serves every room of the agent named by BAND_API_KEY (BAND_BASE_URL or
BAND_REST_URL, BAND_WS_URL) exactly once, running the command per message
or forwarding it. See docs/bandonce.md.

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.forward, "forward", "", "POST each message as JSON to this `URL` instead of running a command")
	fs.StringVar(&o.cancelURL, "cancel-url", "", "where forward mode's cancel calls go (default: the forward URL's path + /cancel)")
	fs.StringVar(&o.key, "key", "", "dedup key `template`: {message_id}, {room_id}, {sender_id} (default msg:{message_id})")
	fs.DurationVar(&o.grace, "grace", bridge.DefaultGrace, "time between SIGTERM and SIGKILL of a cancelled command; also how long a running command may finish on shutdown")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound one message's work; when it runs out the work is cancelled and counts as a failure (default: none)")
	fs.IntVar(&o.attempts, "max-attempts", 10, "failures before a message is dead-lettered")
	fs.DurationVar(&o.backoff.BaseDelay, "backoff-base", time.Second, "the longest wait after a message's first failure; each later one may double")
	fs.DurationVar(&o.backoff.MaxDelay, "backoff-max", 2*time.Minute, "cap on the wait between two attempts of a failed message")
	fs.StringVar(&o.ledger, "ledger", "", "keep the ledger (replies, acks, steps, dead letters) in this bbolt `file`, across restarts (default: in memory)")
	fs.BoolVar(&o.once, "once", false, "answer what is waiting in every room, then exit (for cron and batch jobs)")
	fs.BoolVar(&o.verbose, "v", false, "log debug detail")
	commandEnvFlags(fs, &o.env, &o.passKey)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.argv = fs.Args()
	switch {
	case o.forward == "" && len(o.argv) == 0:
		return o, errors.New("no command: put it after --, e.g. bandonce run -- ./reply.sh (or use -forward URL)")
	case o.forward != "" && len(o.argv) > 0:
		return o, errors.New("-forward and a command are exclusive: choose one")
	case o.cancelURL != "" && o.forward == "":
		return o, errors.New("-cancel-url needs -forward")
	case o.forward != "" && (o.passKey || len(o.env) > 0):
		return o, errors.New("-env and -pass-key are for a command; -forward sends no environment")
	case o.grace <= 0:
		return o, errors.New("-grace must be positive")
	case o.timeout < 0 || o.attempts < 1:
		return o, errors.New("-timeout must not be negative and -max-attempts must be at least 1")
	case o.backoff.BaseDelay <= 0 || o.backoff.MaxDelay < o.backoff.BaseDelay:
		return o, errors.New("-backoff-base must be positive and -backoff-max at least -backoff-base")
	}
	return o, nil
}

// commandEnvFlags declares -env and -pass-key, which say what of bandonce's
// environment a command gets: bandonce run and bandonce deadletters replay
// run the same command, so they take the same two flags.
func commandEnvFlags(fs *flag.FlagSet, env *[]string, passKey *bool) {
	fs.Func("env", "pass the command these `NAMES` of bandonce run's environment too (comma-separated, repeatable; NAME* is a prefix); it gets only "+strings.Join(bridge.DefaultEnv, ",")+" otherwise", func(v string) error {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				*env = append(*env, n)
			}
		}
		return nil
	})
	fs.BoolVar(passKey, "pass-key", false, "give the command the agent's key (BAND_API_KEY) and Band's URLs; RISK: whatever can read it can print it, and a model can be talked into printing it")
}

// envConfig is the Shell's configuration from the environment, read as
// bandonce.ConfigFromEnv reads it (the key, the URLs in Band's SDKs' forms
// too, the agent id to check, the timeouts), or the line that says why
// it cannot be.
func envConfig(getenv func(string) string) (bandonce.Config, error) {
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if envErr := (*bandonce.EnvError)(nil); errors.As(err, &envErr) {
		return cfg, fmt.Errorf("%s: %s", envErr.Var, envErr.Reason)
	}
	return cfg, err
}

// lookup is os.Getenv over environ.
func lookup(environ []string) func(string) string {
	return func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if n, v, _ := strings.Cut(environ[i], "="); n == name {
				return v
			}
		}
		return ""
	}
}

// handler is a bridge's Handler and what it must finish before exit.
type handler interface {
	Handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error)
}

func runMain(ctx context.Context, args []string, environ []string, stderr io.Writer) int {
	getenv := lookup(environ)
	o, err := parseRun(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "bandonce run:", err)
		return exitCannot
	}
	cfg, err := envConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce run:", err)
		return exitCannot
	}
	key := cfg.APIKey
	// The command's stderr is logged too: scrub the key from it, as the
	// Shell scrubs its own records.
	secret := keyguard.New(key)
	logger := keyguard.Logger(cmdlog.New(stderr, o.verbose), secret)
	opts := bridge.Options{KeyTemplate: o.key, Grace: o.grace, Logger: logger, Key: secret, PassKey: o.passKey, Env: o.env, Environ: environ}
	var h handler
	wait := func() {}
	if o.forward != "" {
		f, err := bridge.NewForward(o.forward, bridge.ForwardOptions{Options: opts, CancelURL: o.cancelURL})
		if err != nil {
			fmt.Fprintln(stderr, "bandonce run:", err)
			return exitCannot
		}
		h, wait = f, f.Wait
		logger.Info("bandonce run: forwarding", "url", o.forward, "cancel_url", f.CancelURL())
	} else {
		c, err := bridge.NewCommand(o.argv, opts)
		if err != nil {
			fmt.Fprintln(stderr, "bandonce run:", err)
			return exitCannot
		}
		h = c
		// The orphans a command's children leave come here, to be
		// killed with the rest of the command.
		_ = procgroup.BecomeSubreaper()
	}
	var ledger bandonce.Ledger
	if o.ledger != "" {
		l, err := openRunLedger(ctx, o.ledger, cfg, logger)
		if err != nil {
			fmt.Fprintln(stderr, "bandonce run:", err)
			return exitCannot
		}
		defer l.Close()
		ledger = l
	}
	cfg.Ledger = ledger
	cfg.Handler = h.Handle
	cfg.Logger = logger
	cfg.HandlerTimeout = o.timeout
	cfg.MaxAttempts = o.attempts
	cfg.Backoff = o.backoff
	// On shutdown a running command may finish for the grace, then it is
	// cancelled: SIGTERM, and SIGKILL after the grace more.
	cfg.ShutdownTimeout = o.grace
	shell, err := bandonce.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bandonce run:", err)
		return exitCannot
	}
	if o.once {
		res, err := shell.Drain(ctx)
		wait()
		if err == nil && !res.Drained {
			fmt.Fprintln(stderr, "bandonce run: stopped before every room was drained; run again to finish")
			return exitFailed
		}
		if err == nil {
			logger.Info("bandonce run: drained every room", "rooms", res.Rooms, "replied", res.Outcomes[bandonce.Replied], "stopped_rooms", len(res.Stopped))
			return exitOK
		}
		return explainRun(err, stderr)
	}
	err = shell.Run(ctx)
	wait()
	if err == nil {
		logger.Info("bandonce run: stopped")
		return exitOK
	}
	return explainRun(err, stderr)
}

// explainRun turns the Shell's error into what the user should know, and
// the exit status.
func explainRun(err error, stderr io.Writer) int {
	switch {
	case errors.Is(err, bandonce.ErrUnauthorized):
		fmt.Fprintln(stderr, "bandonce run: the API key in BAND_API_KEY was rejected by Band; check that it is this agent's key:", err)
		return exitFailed
	case errors.Is(err, bandonce.ErrSuperseded):
		fmt.Fprintln(stderr, "bandonce run: another connection of this agent took over; this one stops (run one bandonce run per agent)")
		return exitFailed
	}
	fmt.Fprintln(stderr, "bandonce run:", err)
	return exitFailed
}
