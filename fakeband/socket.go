package fakeband

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/band-once/bandonce/internal/phoenix"
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

// sockets is the registry of live connections. Guarded by b.mu.
type sockets struct {
	byAgent map[string][]*conn
}

func (s *sockets) init() { s.byAgent = map[string][]*conn{} }

func (s *sockets) all() []*conn {
	var out []*conn
	for _, cs := range s.byAgent {
		out = append(out, cs...)
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

func (b *Band) socketRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIPrefix+"/socket/websocket", b.serveSocket)
}

// serveSocket upgrades an agent's connection. Like Band, a bad key is an
// empty 403 before the upgrade. A newer connection supersedes the older
// ones of the same agent.
func (b *Band) serveSocket(w http.ResponseWriter, r *http.Request) {
	f, reqID, open := b.admit(EndpointSocket)
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
	if err != nil {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusForbidden)
		return
	}
	ws, acceptErr := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if acceptErr != nil {
		return // Accept has answered the client
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{b: b, agentID: agent.id, ws: ws, ctx: ctx, cancel: cancel, out: newOutbox(), joins: map[string]string{}}
	if !b.register(c) {
		c.abort()
		return
	}
	go c.writeLoop()
	c.readLoop()
}

// register adds c as the agent's connection, superseding older ones, and
// accounts for c's two goroutines; false after Close.
func (b *Band) register(c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	for _, old := range b.sockets.byAgent[c.agentID] {
		b.supersedeLocked(old, "a newer connection of this agent was opened")
	}
	b.sockets.byAgent[c.agentID] = []*conn{c}
	b.truth.record(Event{Kind: EventConnect, AgentID: c.agentID})
	b.wg.Add(2)
	return true
}

// readLoop answers the client's frames until the connection ends, then
// unregisters it.
func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer func() {
		c.b.mu.Lock()
		c.b.sockets.remove(c)
		c.b.mu.Unlock()
		c.abort()
	}()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		f, err := phoenix.Decode(data)
		if err != nil {
			continue // a garbled frame is dropped, the connection stays
		}
		c.handle(f)
	}
}

func (c *conn) handle(f phoenix.Frame) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	_, joined := c.joins[f.Topic]
	switch {
	case f.Topic == phoenix.TopicPhoenix && f.Event == phoenix.EventHeartbeat:
		c.reply(f, "", "ok", nil)
	case f.Event == phoenix.EventJoin:
		joinRef := f.JoinRef
		if joinRef == "" {
			joinRef = f.Ref
		}
		if reason := c.b.refuseJoinLocked(c.agentID, f.Topic); reason != "" {
			c.reply(f, joinRef, "error", map[string]string{"reason": reason})
			return
		}
		c.joins[f.Topic] = joinRef
		c.reply(f, joinRef, "ok", nil)
	case !joined:
		c.reply(f, f.JoinRef, "error", map[string]string{"reason": "unmatched topic"})
	case f.Event == phoenix.EventLeave:
		joinRef := c.joins[f.Topic]
		delete(c.joins, f.Topic)
		c.reply(f, joinRef, "ok", nil)
		c.send(phoenix.Frame{JoinRef: joinRef, Ref: joinRef, Topic: f.Topic, Event: phoenix.EventClose})
	}
	// Other events on a joined topic are ignored: Band's channels take none.
}

// refuseJoinLocked returns why the agent may not join topic, or "".
func (b *Band) refuseJoinLocked(agentID, topic string) string {
	kind, id, _ := strings.Cut(topic, ":")
	switch kind {
	case "agent_control", "agent_rooms":
		if id == agentID {
			return ""
		}
		return "unauthorized"
	case "chat_room":
		if r := b.rooms[id]; r != nil && r.has(agentID) {
			return ""
		}
		return "unauthorized"
	}
	return "unmatched topic"
}

func (c *conn) reply(to phoenix.Frame, joinRef, status string, response any) {
	if response == nil {
		response = struct{}{}
	}
	payload, _ := json.Marshal(map[string]any{"status": status, "response": response})
	c.send(phoenix.Frame{JoinRef: joinRef, Ref: to.Ref, Topic: to.Topic, Event: phoenix.EventReply, Payload: payload})
}

func (c *conn) send(f phoenix.Frame) {
	data, err := phoenix.Encode(f)
	if err == nil {
		c.out.put(outItem{frame: data})
	}
}
