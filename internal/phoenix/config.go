package phoenix

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"
)

// Handler receives the pushes of one joined topic. It is called on the
// receive goroutine, in frame order, so it must not block: a slow handler
// delays every other topic and the heartbeat replies behind it.
type Handler func(event string, payload json.RawMessage)

// Config says where to connect and how patiently. Only URL is required.
type Config struct {
	// URL is the socket endpoint, ws(s)://host/api/v1/socket/websocket.
	// Query parameters already present are kept.
	URL string
	// APIKey is sent as the x-api-key header of the upgrade, which Band
	// prefers to the api_key query parameter, and never in the URL: every
	// error of the dialer quotes the URL. An api_key parameter already in
	// URL is taken out of it and used as the key when APIKey is empty.
	APIKey string
	// AgentID is sent as the agent_id query parameter.
	AgentID string
	// HTTPClient performs the upgrade; nil means http.DefaultClient. A
	// copy of it is used that refuses a redirect to another origin.
	HTTPClient *http.Client
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// HeartbeatInterval is how often a heartbeat is sent. A heartbeat (or
	// a join) still unanswered when the next heartbeat is due means the
	// connection is dead. It also bounds one upgrade attempt. 0 means 30s.
	HeartbeatInterval time.Duration
	// ReconnectBase and ReconnectMax shape the full-jitter exponential
	// backoff between connection attempts and between rejoins of one
	// topic. 0 means 500ms and 30s.
	ReconnectBase time.Duration
	ReconnectMax  time.Duration
	// MaxRetryAfter caps the wait a 429 asks for. 0 means 60s.
	MaxRetryAfter time.Duration
	// Seed seeds the jitter so tests can replay it; 0 means random.
	Seed uint64
	// OnConnected runs after each (re)connect, once the join of every
	// registered topic was sent and answered (ok or error). It runs on
	// the receive goroutine and must not block.
	OnConnected func()
	// OnDisconnected runs on Run's goroutine each time an established
	// connection ends, with the reason (the context's cause on shutdown).
	OnDisconnected func(err error)
	// OnJoinError runs on the receive goroutine when the server refuses
	// a join; response is the reply's response object.
	OnJoinError func(topic string, response json.RawMessage)
	// OnJoined runs on the receive goroutine each time the server accepts
	// a join of topic (the first, and every rejoin): pushes flow from
	// then on, and anything sent before may have been missed. It must not
	// block.
	OnJoined func(topic string)
}

// Defaults applied by New to zero fields.
const (
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultReconnectBase     = 500 * time.Millisecond
	DefaultReconnectMax      = 30 * time.Second
	DefaultMaxRetryAfter     = 60 * time.Second
)

func (cfg Config) withDefaults() Config {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.ReconnectBase <= 0 {
		cfg.ReconnectBase = DefaultReconnectBase
	}
	if cfg.ReconnectMax <= 0 {
		cfg.ReconnectMax = DefaultReconnectMax
	}
	if cfg.ReconnectMax < cfg.ReconnectBase {
		cfg.ReconnectMax = cfg.ReconnectBase
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}
