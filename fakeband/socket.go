package fakeband

import (
	"context"
	"net/http"

	"github.com/coder/websocket"
)

// conn is one agent's Phoenix connection.
type conn struct {
	b       *Band
	agentID string
	ws      *websocket.Conn
	ctx     context.Context
	cancel  context.CancelFunc
	out     *outbox
	joins   map[string]string // topic -> join_ref; guarded by b.mu
}

// abort ends the connection at once, without a close handshake.
func (c *conn) abort() {
	c.cancel()
	_ = c.ws.CloseNow()
}

// sockets is the registry of connections. Guarded by b.mu.
type sockets struct {
	byAgent map[string][]*conn // the agent's current connection: pushes go here
	live    map[*conn]bool     // every connection not yet ended, superseded and dropped ones too
}

func (s *sockets) init() {
	s.byAgent = map[string][]*conn{}
	s.live = map[*conn]bool{}
}

// all returns every connection Close must end.
func (s *sockets) all() []*conn {
	out := make([]*conn, 0, len(s.live))
	for c := range s.live {
		out = append(out, c)
	}
	return out
}

func (s *sockets) remove(c *conn) {
	cs := s.byAgent[c.agentID]
	for i, x := range cs {
		if x == c {
			s.byAgent[c.agentID] = append(cs[:i:i], cs[i+1:]...)
			return
		}
	}
}

// socketPath is where agents open their socket.
const socketPath = APIPrefix + "/socket/websocket"

func (b *Band) socketRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET "+socketPath, b.serveSocket)
}

// serveSocket upgrades an agent's connection. Like Band, a bad key is an
// empty 403 before the upgrade. A newer connection supersedes the older
// ones of the same agent.
func (b *Band) serveSocket(w http.ResponseWriter, r *http.Request) {
	f, reqID, open := b.admit(EndpointSocket, nil) // the upgrade is never throttled
	if !open {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if f != nil {
		switch f.Kind {
		case FailBefore:
			writeFailBefore(w, f, reqID)
			return
		case Delay:
			if !b.wait(r.Context(), f.Delay) {
				return
			}
		case LoseResponse: // nothing is applied by an upgrade; the client just fails
			loseResponse(w)
			return
		}
	}
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key = r.URL.Query().Get("api_key")
	}
	agent, err := b.authenticate(agentSide, key)
	if err != nil || !socketOriginAllowed(r) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusForbidden)
		return
	}
	// The origin was checked above, with the Host rules of the admin API.
	ws, acceptErr := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if acceptErr != nil {
		return // Accept has answered the client
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{b: b, agentID: agent.id, ws: ws, ctx: ctx, cancel: cancel, out: newOutbox(cancel), joins: map[string]string{}}
	if !b.register(c) {
		c.abort()
		return
	}
	go c.writeLoop()
	c.readLoop()
}

// socketOriginAllowed reports whether an upgrade may come from where it
// says it does. Agents' clients (the SDKs, phoenix.js under Node, this
// module's) send no Origin; a browser always does, so an upgrade with a
// foreign Origin is a page elsewhere that learnt a key (the fake's keys
// follow from the seed, and its docs print them): it would read the
// agent's pushes and supersede its socket. A same-origin one must also
// name a loopback Host, as the admin API insists, against DNS rebinding.
func socketOriginAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return origin == "" || (servedHost(r) && sameOrigin(origin, r.Host))
}

// register adds c as the agent's connection, superseding older ones, and
// accounts for c's two goroutines; false after Close.
func (b *Band) register(c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if old := b.sockets.byAgent[c.agentID]; len(old) > 0 {
		const why = "a newer connection of this agent was opened"
		for _, o := range old {
			b.supersedeLocked(o, why)
		}
		b.truth.record(Event{Kind: EventSupersede, AgentID: c.agentID, Detail: why})
	}
	b.sockets.byAgent[c.agentID] = []*conn{c}
	b.sockets.live[c] = true
	b.truth.record(Event{Kind: EventConnect, AgentID: c.agentID})
	b.wg.Add(2)
	return true
}
