package bandonce

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/wire"
)

// DefaultBaseURL is Band's production REST root.
const DefaultBaseURL = "https://app.band.ai/api/v1"

// Config configures a Shell. Every field's zero value is a production
// default; only APIKey and Handler are required.
type Config struct {
	// APIKey is the agent's Band API key, sent as X-API-Key and nowhere
	// else: no log record, error, outcome or printed Config shows it
	// (docs/security.md). Required.
	APIKey string

	// BaseURL is the REST root. Empty means DefaultBaseURL.
	BaseURL string

	// SocketURL is the Phoenix WebSocket endpoint for pushes. Empty means
	// derived from BaseURL: scheme ws(s), path {BaseURL}/socket/websocket.
	SocketURL string

	// InsecurePlaintext allows a plain http:// BaseURL or ws:// SocketURL
	// whose host is not loopback, which sends the key across the network
	// in clear. False (the default) refuses such URLs with a
	// *ConfigError; loopback hosts (127.0.0.0/8, ::1, localhost) and the
	// in-process fake Band never need it.
	InsecurePlaintext bool

	// DisableSocket turns push off: no control signals, no wake-ups, rooms
	// found by listing every ResyncInterval and served by polling every
	// PollInterval. False (the default) connects the socket.
	DisableSocket bool

	// AgentID is the Band id of the agent the APIKey belongs to. Empty
	// means whichever agent Band says (GET /agent/me). When set, Run and
	// Drain check it against Band's answer at start and fail with
	// ErrAgentMismatch if the key is another agent's.
	AgentID string

	// Rooms limits the shell to these room ids. Empty means every room
	// the agent is in, including rooms it joins while running.
	Rooms []string

	// Handler does the work for each message. Required.
	Handler Handler

	// Ledger records posts and pending acks. Nil means a new MemoryLedger.
	Ledger Ledger

	// MaxAttempts is how many handler failures a message may take before
	// it is dead-lettered. Zero means 10. Interrupts, stops and crashes
	// are not failures.
	MaxAttempts int

	// Backoff paces a failed message's next handler attempts. Its zero
	// value is the production default, which rides out a dependency down
	// for minutes.
	Backoff Backoff

	// DeadLetterNotice returns the text of the error event posted in the
	// room, exactly once (its dedup key is NoticeKey of the message id),
	// when a message is dead-lettered, so the person who asked does not
	// wait in silence. Nil means DefaultDeadLetterNotice, which says why
	// in plain words and never quotes the error. A func that returns ""
	// turns the notice off. The API key is scrubbed from whatever it
	// returns.
	DeadLetterNotice func(DeadLetter) string

	// Retry bounds the retries of transient HTTP failures. Its zero value
	// is the production default.
	Retry RetryPolicy

	// HTTPClient sends every request and the socket's upgrade. Nil means
	// http.DefaultTransport. Unless the client has a Timeout of its own,
	// each REST request is bounded by RequestTimeout.
	HTTPClient *http.Client

	// RequestTimeout bounds each HTTP request. Zero means 30 s.
	RequestTimeout time.Duration

	// Logger receives the shell's logs (docs/observability.md lists
	// them). Nil means slog.Default(). Whatever the logger, the APIKey is
	// scrubbed from every record before it gets there.
	Logger *slog.Logger

	// Hooks observe the shell: outcomes, handler calls, requests, control
	// signals, the socket and rooms. Nil fields are skipped. Package
	// bandonce/otel wires them to OpenTelemetry.
	Hooks Hooks

	// StartTimeout bounds how long Run and Drain keep trying to reach Band
	// at start (GET /agent/me, and GET /agent/chats when Rooms is empty)
	// through connection errors, 429 and 5xx answers, warning at every
	// retry. When it runs out they return a *StartError that names the
	// URL. Zero means 2 minutes.
	StartTimeout time.Duration

	// HandlerTimeout bounds one handler call; when it runs out the call
	// counts as a failure. Zero means no limit.
	HandlerTimeout time.Duration

	// PollInterval is how long an idle room waits before asking /next
	// again when no socket is connected. Zero means 2 s.
	PollInterval time.Duration

	// ResyncInterval is how often an idle room asks /next while the socket
	// is connected, and how often a stopped room probes it, as a safety
	// net for a lost push. The agent's rooms are listed again every fifth
	// interval (every interval without a socket). Zero means 60 s.
	ResyncInterval time.Duration

	// MarkTimeout bounds each bookkeeping call (the processing, processed
	// and failed marks), which run even after the handler's context was
	// cancelled. Zero means 15 s.
	MarkTimeout time.Duration

	// ShutdownTimeout is how long running handlers may finish after Run's
	// context ends before they are cancelled with ErrShutdown. Zero means
	// 10 s.
	ShutdownTimeout time.Duration

	// MaxConcurrentRooms caps how many rooms run a turn (ask /next,
	// handle a message, settle it) at once; a room with nothing to do
	// costs no goroutine, and a turn waiting on a slow handler costs its
	// goroutine and what the handler holds (docs/performance.md). The
	// requests of all turns together are bounded by MaxRequestsInFlight
	// whatever this is. Set it lower when the Handler calls a service with
	// a concurrency limit of its own, such as a model API allowing so many
	// calls at once. Zero means DefaultMaxConcurrentRooms.
	MaxConcurrentRooms int

	// MaxRequestsInFlight caps the shell's REST requests in flight, from
	// all rooms together. Every request passes one budget: once Band
	// answers 429 the shell paces its requests at a rate it halves on
	// every 429 (pausing for a Retry-After), raises slowly while Band
	// accepts them, and lifts after 30 s without a 429; the log warns
	// when the pace drops and when it is lifted (Hooks.Throttle). Zero means 32.
	MaxRequestsInFlight int

	// MaxResponseBytes caps the body of every answer the shell reads from
	// Band; a body past it is measured but never kept. Zero means 4 MiB.
	// Nothing that is too large stops a room: a /context page over the
	// cap is asked again with fewer messages, down to one; a message
	// /next serves over the cap is dead-lettered with a reason that names
	// its size; a reply over it is refused (Permanent), because the guard
	// could not read it back from /context. Raise it for agents whose
	// messages run to megabytes.
	MaxResponseBytes int

	// IdleRequestInterval spreads the requests that only guard against a
	// lost push (idle rooms' resyncs, polls without a socket, stopped
	// rooms' probes): at most one per interval for the whole shell, the
	// room longest due first. Zero means 500 ms, two a second.
	IdleRequestInterval time.Duration
}

// DefaultMaxConcurrentRooms is how many rooms run a turn at once when
// Config.MaxConcurrentRooms is zero: enough for an agent in ten thousand
// rooms, each waiting seconds on a model, to wait for them all at once.
const DefaultMaxConcurrentRooms = 10000

// Hooks observe the shell. Each is called synchronously on the goroutine
// doing the work (a room's, the socket's) and must return quickly without
// blocking: a slow hook delays that room, or every control signal. An error
// a hook receives never shows the APIKey. doc.go says what each is for.
type Hooks struct {
	// Outcome is called once each time a message's delivery is settled.
	Outcome func(Outcome)
	// DeadLetter is called when a message is given up on: marked failed
	// with the reason, then consumed so the room moves on.
	DeadLetter func(Outcome)
	// InvalidControl is called with a control push the shell could not
	// use, and why.
	InvalidControl func(raw []byte, err error)

	// DeliveryStart is called when /next serves a message, before the
	// shell does anything with it. The context it returns (ctx itself, or
	// a context derived from it, such as one carrying a trace span) is the
	// one the delivery's requests, handler and hooks run under; nil means
	// ctx.
	DeliveryStart func(ctx context.Context, d Delivery) context.Context
	// DeliveryEnd is called once for every DeliveryStart, when the shell
	// is done with the delivery, with its Outcome (zero when it ended
	// without one, such as at shutdown: Band serves the message again).
	DeliveryEnd func(ctx context.Context, d Delivery)
	// HandlerStart is called just before the Handler. Like DeliveryStart
	// it may return a context derived from ctx, which the Handler gets.
	HandlerStart func(ctx context.Context, d Delivery) context.Context
	// HandlerEnd is called when the Handler returns (or panics), with how
	// long it ran and its error; context.Cause(ctx) says whether a signal
	// or a shutdown cancelled it.
	HandlerEnd func(ctx context.Context, d Delivery, took time.Duration, err error)
	// GuardRead is called after each read of the room by the dedup guard,
	// with whether the reply was found there already.
	GuardRead func(ctx context.Context, d Delivery, found bool, err error)
	// Request is called after every HTTP attempt to Band's REST API,
	// retries included.
	Request func(ctx context.Context, r Request)
	// Step is called when a Message.Step returns, with whether its fn ran
	// or its result was replayed from the ledger, how long it took and
	// its error. ctx is the one the handler passed to Step.
	Step func(ctx context.Context, s StepRun)
	// Control is called for each room a control signal was applied to,
	// and once for a supersede.
	Control func(ControlSignal)
	// Socket is called when the socket has connected and joined its
	// topics (up), and when a connection ends (down, with why).
	Socket func(up bool, err error)
	// Throttle is called when Band's 429s make the shell pace every
	// request it sends (throttled, with the pace in requests a second),
	// each time it cuts that pace again, and once the pace has grown back
	// to no limit (throttled false, rate 0).
	Throttle func(throttled bool, rate float64)
	// Room is called when the shell starts serving a room (added) and
	// when it stops (removed: the agent left it, or Run is ending).
	Room func(roomID string, added bool)
}

// OutcomeKind says how one delivery of a message ended.
type OutcomeKind int

const (
	// Replied: the reply was posted and the message marked processed.
	Replied OutcomeKind = iota + 1
	// NoReply: the handler returned no reply; the message was consumed.
	NoReply
	// DuplicateDropped: the reply was already in the room (an earlier
	// delivery posted it); it was not posted again.
	DuplicateDropped
	// Failed: the handler failed; the message was marked failed and comes
	// back through /next.
	Failed
	// DeadLettered: the message was given up on and consumed.
	DeadLettered
	// Interrupted: an interrupt aborted the cycle; nothing was posted and
	// the message was consumed.
	Interrupted
	// Stopped: a stop aborted the cycle; the message stays for replay.
	Stopped
	// AckPending: the reply is settled but the processed mark failed; only
	// the mark is retried.
	AckPending
	// Acknowledged: a pending processed mark was retried and landed.
	Acknowledged
)

var outcomeNames = [...]string{"", "replied", "no-reply", "duplicate-dropped", "failed", "dead-lettered", "interrupted", "stopped", "ack-pending", "acknowledged"}

func (k OutcomeKind) String() string {
	if k > 0 && int(k) < len(outcomeNames) {
		return outcomeNames[k]
	}
	return "unknown"
}

// Outcome describes one settled delivery.
type Outcome struct {
	Kind      OutcomeKind
	RoomID    string
	MessageID string
	Attempt   int
	DedupKey  string
	// Err is the handler's error for Failed and DeadLettered.
	Err error
}

// String, GoString, Format and LogValue show a Config with its APIKey
// replaced by "[redacted]", so that printing or logging one never shows
// the key.
func (c Config) String() string { return c.redacted("%+v") }

// GoString is the %#v form, with the APIKey redacted.
func (c Config) GoString() string { return c.redacted("%#v") }

// Format writes GoString for %#v and String for every other verb.
func (c Config) Format(f fmt.State, verb rune) { keyguard.Format(f, verb, c) }

// LogValue is String.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// printableConfig has Config's fields and none of its methods, so fmt
// prints it field by field.
type printableConfig Config

func (c Config) redacted(format string) string {
	c.APIKey = keyguard.Redact(c.APIKey)
	return keyguard.SprintAs(format, printableConfig(c), "bandonce.Config")
}

// settings is a Config with its defaults applied. Its Config.APIKey is
// empty: the key is in apiKey, which fmt prints as an address, so not
// even %+v of a Shell shows it.
type settings struct {
	Config
	apiKey       *keyguard.Secret
	baseURL      *url.URL
	socketURL    string
	socketClient *http.Client  // HTTPClient without the per-request deadline or the limiter
	limiter      *wire.Limiter // every REST request's budget
}

func (c Config) withDefaults() (settings, error) {
	if strings.TrimSpace(c.APIKey) == "" {
		return settings{}, &ConfigError{Field: "APIKey", Reason: "required"}
	}
	if c.Handler == nil {
		return settings{}, &ConfigError{Field: "Handler", Reason: "required"}
	}
	for name, d := range map[string]time.Duration{
		"RequestTimeout": c.RequestTimeout, "HandlerTimeout": c.HandlerTimeout,
		"PollInterval": c.PollInterval, "ResyncInterval": c.ResyncInterval,
		"MarkTimeout": c.MarkTimeout, "ShutdownTimeout": c.ShutdownTimeout,
		"IdleRequestInterval": c.IdleRequestInterval, "StartTimeout": c.StartTimeout,
	} {
		if d < 0 {
			return settings{}, &ConfigError{Field: name, Reason: "must not be negative"}
		}
	}
	if c.MaxAttempts < 0 {
		return settings{}, &ConfigError{Field: "MaxAttempts", Reason: "must not be negative"}
	}
	if c.MaxConcurrentRooms < 0 {
		return settings{}, &ConfigError{Field: "MaxConcurrentRooms", Reason: "must not be negative"}
	}
	if c.MaxRequestsInFlight < 0 {
		return settings{}, &ConfigError{Field: "MaxRequestsInFlight", Reason: "must not be negative"}
	}
	if c.MaxResponseBytes < 0 {
		return settings{}, &ConfigError{Field: "MaxResponseBytes", Reason: "must not be negative"}
	}
	if err := validateRetry(c.Retry); err != nil {
		return settings{}, err
	}
	if err := c.Backoff.validate(); err != nil {
		return settings{}, err
	}
	seen := make(map[string]bool, len(c.Rooms))
	for _, r := range c.Rooms {
		if strings.TrimSpace(r) == "" || seen[r] {
			return settings{}, &ConfigError{Field: "Rooms", Reason: "room ids must be non-empty and distinct"}
		}
		seen[r] = true
	}
	base, err := url.Parse(strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return settings{}, &ConfigError{Field: "BaseURL", Reason: "want an absolute http(s) URL"}
	}
	if err := c.checkKeySafety("BaseURL", base); err != nil {
		return settings{}, err
	}
	s := settings{Config: c, apiKey: keyguard.New(c.APIKey), baseURL: base}
	s.APIKey = ""
	s.MaxAttempts = cmp.Or(c.MaxAttempts, defaultMaxAttempts)
	s.Backoff = c.Backoff.withDefaults()
	s.RequestTimeout = cmp.Or(c.RequestTimeout, 30*time.Second)
	s.PollInterval = cmp.Or(c.PollInterval, 2*time.Second)
	s.ResyncInterval = cmp.Or(c.ResyncInterval, 60*time.Second)
	s.MarkTimeout = cmp.Or(c.MarkTimeout, 15*time.Second)
	s.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	s.MaxConcurrentRooms = cmp.Or(c.MaxConcurrentRooms, DefaultMaxConcurrentRooms)
	s.MaxRequestsInFlight = cmp.Or(c.MaxRequestsInFlight, 32)
	s.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, wire.MaxBodyBytes)
	s.IdleRequestInterval = cmp.Or(c.IdleRequestInterval, 500*time.Millisecond)
	s.StartTimeout = cmp.Or(c.StartTimeout, DefaultStartTimeout)
	s.Retry = retryDefaults(c.Retry)
	if s.Ledger == nil {
		s.Ledger = NewMemoryLedger()
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	// Every log line of the shell, the REST client and the socket passes
	// here, so a key quoted by a server or a handler's panic stops here.
	s.Logger = keyguard.Logger(s.Logger, s.apiKey)
	s.Hooks = s.Hooks.scrubbed(s.apiKey)
	s.limiter = wire.NewLimiter(s.MaxRequestsInFlight, s.Retry.MaxRetryAfter)
	s.limiter.OnPace(newPaceWatch(s.Logger, s.limiter, s.Hooks.Throttle).changed)
	s.HTTPClient, s.socketClient = wire.RequestClients(c.HTTPClient, s.RequestTimeout, s.limiter)
	if c.SocketURL != "" {
		u, err := url.Parse(c.SocketURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return settings{}, &ConfigError{Field: "SocketURL", Reason: "want an absolute ws(s) URL"}
		}
		if err := c.checkKeySafety("SocketURL", u); err != nil {
			return settings{}, err
		}
	}
	s.socketURL = c.SocketURL
	if s.socketURL == "" && !c.DisableSocket {
		ws := *base
		ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[base.Scheme]
		ws.Path = strings.TrimRight(base.Path, "/") + "/socket/websocket"
		s.socketURL = ws.String()
	}
	return s, nil
}

// checkKeySafety refuses a URL that would expose the key: one carrying a
// credential of its own, which every transport error would quote, or a
// plain one to a host that is not loopback, unless InsecurePlaintext.
func (c Config) checkKeySafety(field string, u *url.URL) error {
	if keyguard.KeyInURL(u) {
		return &ConfigError{Field: field, Reason: "must not carry a credential (user info or api_key): " +
			"set APIKey, which is sent as a header and never shown"}
	}
	if keyguard.InClear(u) && !c.InsecurePlaintext {
		return &ConfigError{Field: field, Reason: "plain " + u.Scheme + " to a host that is not loopback: " +
			"the API key would cross the network in clear; use " + u.Scheme + "s, or set InsecurePlaintext to accept that"}
	}
	return nil
}
