package bandonce

import (
	"cmp"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultBaseURL is Band's production REST root.
const DefaultBaseURL = "https://app.band.ai/api/v1"

// Config configures a Shell. Every field's zero value is a production
// default; only APIKey and Handler are required.
type Config struct {
	// APIKey is the agent's Band API key, sent as X-API-Key. Required.
	APIKey string

	// BaseURL is the REST root. Empty means DefaultBaseURL.
	BaseURL string

	// SocketURL is the Phoenix WebSocket endpoint for pushes. Empty means
	// derived from BaseURL: scheme ws(s), path {BaseURL}/socket/websocket.
	SocketURL string

	// DisableSocket turns push off: no control signals, no wake-ups, rooms
	// found by listing every ResyncInterval and served by polling every
	// PollInterval. False (the default) connects the socket.
	DisableSocket bool

	// Rooms limits the shell to these room ids. Empty means every room
	// the agent is in, including rooms it joins while running.
	Rooms []string

	// Handler does the work for each message. Required.
	Handler Handler

	// Ledger records posts and pending acks. Nil means a new MemoryLedger.
	Ledger Ledger

	// MaxAttempts is how many handler failures a message may take before
	// it is dead-lettered. Zero means 3. Interrupts, stops and crashes
	// are not failures.
	MaxAttempts int

	// Retry bounds the retries of transient HTTP failures. Its zero value
	// is the production default.
	Retry RetryPolicy

	// HTTPClient sends every request and the socket's upgrade. Nil means
	// http.DefaultTransport. Unless the client has a Timeout of its own,
	// each REST request is bounded by RequestTimeout.
	HTTPClient *http.Client

	// RequestTimeout bounds each HTTP request. Zero means 30 s.
	RequestTimeout time.Duration

	// Logger receives the shell's logs. Nil discards them; nothing is ever
	// written to stderr.
	Logger *slog.Logger

	// Hooks are called as messages are settled. Nil fields are skipped.
	Hooks Hooks

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

	// MaxConcurrentRooms caps how many rooms handle a message at once.
	// Zero means 16.
	MaxConcurrentRooms int
}

// Hooks observe the shell. Each is called on the room's goroutine and must
// return quickly.
type Hooks struct {
	// Outcome is called once each time a message's delivery is settled.
	Outcome func(Outcome)
	// DeadLetter is called when a message is given up on: marked failed
	// with the reason, then consumed so the room moves on.
	DeadLetter func(Outcome)
	// InvalidControl is called with a control push the shell could not
	// use, and why.
	InvalidControl func(raw []byte, err error)
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

// settings is a Config with its defaults applied.
type settings struct {
	Config
	baseURL      *url.URL
	socketURL    string
	socketClient *http.Client // HTTPClient without the per-request deadline
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
	if err := c.Retry.validate(); err != nil {
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
	s := settings{Config: c, baseURL: base}
	s.MaxAttempts = cmp.Or(c.MaxAttempts, 3)
	s.RequestTimeout = cmp.Or(c.RequestTimeout, 30*time.Second)
	s.PollInterval = cmp.Or(c.PollInterval, 2*time.Second)
	s.ResyncInterval = cmp.Or(c.ResyncInterval, 60*time.Second)
	s.MarkTimeout = cmp.Or(c.MarkTimeout, 15*time.Second)
	s.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	s.MaxConcurrentRooms = cmp.Or(c.MaxConcurrentRooms, 16)
	s.Retry = c.Retry.withDefaults()
	if s.Ledger == nil {
		s.Ledger = NewMemoryLedger()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	s.HTTPClient, s.socketClient = requestClients(c.HTTPClient, s.RequestTimeout)
	if c.SocketURL != "" {
		u, err := url.Parse(c.SocketURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return settings{}, &ConfigError{Field: "SocketURL", Reason: "want an absolute ws(s) URL"}
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
