package verify

import (
	"context"
	"net/http"
)

// Env is what one life of the agent gets from the verifier. A kill ends
// the life: its HTTPClient fails every request from then on, its sockets
// drop, and its External refuses further effects, as for a crashed process.
type Env struct {
	// HTTPClient reaches the fake Band. Use it for every request and for
	// the socket upgrade; nothing else reaches the fake.
	HTTPClient *http.Client
	// BaseURL is the REST root and SocketURL the Phoenix socket endpoint.
	BaseURL, SocketURL string
	// APIKey is the agent's key (X-API-Key); AgentID its participant id.
	APIKey, AgentID string
	// External is the double of the world outside Band, where the agent
	// performs its side effects. Its records survive kills.
	External *External
	// Life numbers this life from 1; it changes at every kill.
	Life int
	// Seed is a per-life seed for the agent's own randomness (retry
	// jitter), so a schedule replays exactly.
	Seed uint64
}

// Agent runs one life of the agent until ctx ends, then returns soon
// after. Returning before ctx ends, other than when another instance of the
// agent superseded it, is a violation.
type Agent func(ctx context.Context, env Env) error

// Factory builds a fresh Agent for every life, so a kill forgets everything
// the agent kept in memory. Anything the agent must remember across kills
// has to live somewhere a kill cannot reach (Band, External, a file).
type Factory func() Agent
