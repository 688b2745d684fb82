package bandonce

import (
	"cmp"
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

	// SettleWindow is how long after a POST was written Band may still
	// apply it: the one bound the dedup guard assumes of Band. A send
	// whose outcome is unknown (its answer lost, a timeout, a 5xx, its
	// process killed) may land after the guard read the room and found
	// nothing, because a server keeps working on a request its client
	// gave up on. So the guard reads the room for such a send only once
	// SettleWindow has passed since it was written, and a new life (after
	// a crash, a restart, a supersede) treats every send of an earlier
	// life as unknown until SettleWindow has passed since it began. The
	// room waits meanwhile without holding a worker; other rooms, and a
	// first delivery, wait for nothing.
	//
	// Zero means SettleWindowFactor times RequestTimeout (60 s with the
	// default RequestTimeout): a server that answers within the client's
	// timeout has applied the request by then, and one that keeps working
	// on a request after its client gave up is cut off by its own
	// deadline, which proxies and load balancers commonly set at or below
	// twice a client's. Raise it if Band, or a proxy before it, can hold a
	// request longer; a duplicate reply is the cost of a window too short,
	// latency after a crash that of one too long (docs/performance.md).
	SettleWindow time.Duration

	// Logger receives the shell's logs (docs/observability.md lists
	// them). Nil means slog.Default(). Whatever the logger, the APIKey is
	// scrubbed from every record before it gets there.
	Logger *slog.Logger

	// OutcomeLogLevel is the level of the line the shell logs for each
	// delivery's outcome ("bandonce: outcome", with its room, message,
	// outcome and attempt). Zero is slog.LevelInfo; slog.LevelDebug
	// quiets it under a handler at Info, and any level above the
	// handler's shows it.
	OutcomeLogLevel slog.Level

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

	// MaxConcurrentRooms caps how many rooms run a round (ask /next,
	// handle a message, carry it to its outcome) at once; a room with
	// nothing to do costs no goroutine, and a round waiting on a slow
	// handler costs its goroutine and what the handler holds, about
	// 13 KB (docs/performance.md). The requests of all rounds together
	// are bounded by MaxRequestsInFlight whatever this is. Set it lower
	// when the Handler calls a service with a concurrency limit of its
	// own, such as a model API allowing so many calls at once. Zero means
	// DefaultMaxConcurrentRooms.
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

	// fromEnv records the fields ConfigFromEnv filled, so that an error
	// about one names the variable the user set.
	fromEnv *envOrigin
}

// DefaultMaxConcurrentRooms is how many rooms run a round at once when
// Config.MaxConcurrentRooms is zero: enough for an agent in ten thousand
// rooms, each waiting seconds on a model, to wait for them all at once.
const DefaultMaxConcurrentRooms = 10000

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
	c.fromEnv = nil
	out := keyguard.SprintAs(format, printableConfig(c), "bandonce.Config")
	// The record of where fields came from is not a setting: not shown.
	for _, unset := range []string{", fromEnv:(*bandonce.envOrigin)(nil)", " fromEnv:<nil>"} {
		out = strings.Replace(out, unset, "", 1)
	}
	return out
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
		return settings{}, c.invalid("APIKey", "required")
	}
	if c.Handler == nil {
		return settings{}, c.invalid("Handler", "required")
	}
	for name, d := range map[string]time.Duration{
		"RequestTimeout": c.RequestTimeout, "HandlerTimeout": c.HandlerTimeout, "SettleWindow": c.SettleWindow,
		"PollInterval": c.PollInterval, "ResyncInterval": c.ResyncInterval,
		"MarkTimeout": c.MarkTimeout, "ShutdownTimeout": c.ShutdownTimeout,
		"IdleRequestInterval": c.IdleRequestInterval, "StartTimeout": c.StartTimeout,
	} {
		if d < 0 {
			return settings{}, c.invalid(name, "must not be negative")
		}
	}
	if c.MaxAttempts < 0 {
		return settings{}, c.invalid("MaxAttempts", "must not be negative")
	}
	if c.MaxConcurrentRooms < 0 {
		return settings{}, c.invalid("MaxConcurrentRooms", "must not be negative")
	}
	if c.MaxRequestsInFlight < 0 {
		return settings{}, c.invalid("MaxRequestsInFlight", "must not be negative")
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
			return settings{}, c.invalid("Rooms", "room ids must be non-empty and distinct")
		}
		seen[r] = true
	}
	base, err := url.Parse(strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return settings{}, c.invalid("BaseURL", "want an absolute http(s) URL")
	}
	if err := c.checkKeySafety("BaseURL", base); err != nil {
		return settings{}, err
	}
	s := settings{Config: c, apiKey: keyguard.New(c.APIKey), baseURL: base}
	s.APIKey = ""
	s.MaxAttempts = cmp.Or(c.MaxAttempts, defaultMaxAttempts)
	s.Backoff = c.Backoff.withDefaults()
	s.RequestTimeout = cmp.Or(c.RequestTimeout, 30*time.Second)
	s.SettleWindow = cmp.Or(c.SettleWindow, SettleWindowFactor*s.RequestTimeout)
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
	s.limiter.OnPace(newPaceWatch(s.Logger, s.Hooks.Throttle).changed)
	s.HTTPClient, s.socketClient = wire.RequestClients(c.HTTPClient, s.RequestTimeout, s.limiter)
	if c.SocketURL != "" {
		u, err := url.Parse(c.SocketURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return settings{}, c.invalid("SocketURL", "want an absolute ws(s) URL")
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
		return c.invalid(field, "must not carry a credential (user info or api_key): "+
			"set APIKey, which is sent as a header and never shown")
	}
	if keyguard.InClear(u) && !c.InsecurePlaintext {
		return c.invalid(field, "plain "+u.Scheme+" to a host that is not loopback: "+
			"the API key would cross the network in clear; use "+u.Scheme+"s, or set InsecurePlaintext to accept that")
	}
	return nil
}
