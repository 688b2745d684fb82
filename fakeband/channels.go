package fakeband

import (
	"encoding/json"
	"strings"

	"github.com/coder/websocket"

	"github.com/band-once/bandonce/internal/phoenix"
)

// readLoop answers the client's frames until the connection ends, then
// unregisters it.
func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer func() {
		c.b.mu.Lock()
		c.b.sockets.remove(c)
		delete(c.b.sockets.live, c)
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

// handle answers one client frame the way Band's Phoenix endpoint does.
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
	case "agent_control", "agent_rooms", "agent_contacts":
		if id == agentID {
			return ""
		}
		return "unauthorized"
	case "chat_room", "room_participants":
		if r := b.rooms[id]; r != nil && r.has(agentID) {
			return ""
		}
		return "unauthorized"
	}
	return "unmatched topic"
}

// reply queues a phx_reply to the frame to.
func (c *conn) reply(to phoenix.Frame, joinRef, status string, response any) {
	if response == nil {
		response = struct{}{}
	}
	payload, _ := json.Marshal(map[string]any{"status": status, "response": response})
	c.send(phoenix.Frame{JoinRef: joinRef, Ref: to.Ref, Topic: to.Topic, Event: phoenix.EventReply, Payload: payload})
}

// send queues a frame; replies bypass socket faults, which are for pushes.
func (c *conn) send(f phoenix.Frame) {
	data, err := phoenix.Encode(f)
	if err == nil {
		c.out.put(outItem{frame: data})
	}
}
