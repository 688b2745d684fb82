package fakeband

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/band-once/bandonce/internal/phoenix"
)

// pushLocked sends event on topic to every connection of the agent that
// joined the topic, with that join's join_ref and a null ref, through the
// socket faults. Best effort, as Band's pushes are: no connection or no
// join means the push is lost.
func (b *Band) pushLocked(agentID, topic, event string, payload any) {
	var data []byte // marshalled for the first connection that joined topic
	for _, c := range b.sockets.byAgent[agentID] {
		joinRef, joined := c.joins[topic]
		if !joined {
			continue
		}
		if data == nil {
			data = marshalPayload(payload)
			if data == nil {
				return
			}
		}
		frame, err := phoenix.Encode(phoenix.Frame{JoinRef: joinRef, Topic: topic, Event: event, Payload: data})
		if err != nil {
			continue
		}
		b.enqueuePushLocked(c, event, frame)
	}
}

// marshalPayload is payload's JSON, nil if it has none: a message
// without reflection (appendMessage), anything else by encoding/json.
func marshalPayload(payload any) []byte {
	if m, ok := payload.(chatMessageJSON); ok {
		if data, ok := appendMessage(nil, &m); ok {
			return data
		}
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return nil
	}
	return data
}

type roomAddedJSON struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	InsertedAt time.Time `json:"inserted_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// roomRemovedJSON carries status and type because the TypeScript SDK's
// schema requires them (packages/sdk/src/platform/streaming/payloadSchemas.ts)
// and drops a room_removed without them.
type roomRemovedJSON struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	Type      string    `json:"type"`
	RemovedAt time.Time `json:"removed_at"`
}

// pushRoomLocked sends room_added or room_removed on agent_rooms:{agent}.
func (b *Band) pushRoomLocked(agentID, event string, r *room) {
	var payload any = roomAddedJSON{ID: r.id, Title: r.title, InsertedAt: r.at, UpdatedAt: r.at}
	if event == "room_removed" {
		payload = roomRemovedJSON{ID: r.id, Title: r.title, Status: "active", Type: r.kind(), RemovedAt: b.stamp()}
	}
	b.pushLocked(agentID, "agent_rooms:"+agentID, event, payload)
}

// participantAddedJSON is participant_added on room_participants:{room},
// with the fields both official SDKs read (PY: ParticipantAddedPayload in
// src/band/client/streaming/client.py; TS: payloadSchemas.ts).
type participantAddedJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Handle      string `json:"handle"`
	Description string `json:"description,omitempty"`
}

type participantRemovedJSON struct {
	ID string `json:"id"`
}

// pushParticipantsLocked sends a participant event to every agent of the
// room that joined room_participants:{room}.
func (b *Band) pushParticipantsLocked(r *room, event string, payload any) {
	if len(b.sockets.byAgent) == 0 {
		return // nobody is connected: skip the encoding
	}
	topic := "room_participants:" + r.id
	for _, id := range r.order {
		if b.participants[id].isAgent() {
			b.pushLocked(id, topic, event, payload)
		}
	}
}

type supersedeJSON struct {
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// supersedeLocked pushes the terminal supersede to c (if it joined its
// control topic), then closes it after the push, and stops pushing to it. The push
// bypasses socket faults: it is the one signal that stops a client from
// fighting for the connection.
func (b *Band) supersedeLocked(c *conn, message string) {
	topic := "agent_control:" + c.agentID
	if joinRef, joined := c.joins[topic]; joined {
		payload, _ := json.Marshal(supersedeJSON{Reason: "superseded", Message: message, Retryable: false})
		frame, err := phoenix.Encode(phoenix.Frame{JoinRef: joinRef, Topic: topic, Event: "supersede", Payload: payload})
		if err == nil {
			c.out.put(outItem{frame: frame})
		}
	}
	c.out.put(outItem{close: closeGracefully})
	b.sockets.remove(c)
}

// Supersede pushes supersede to the agent's connections and closes them,
// as Band does when another connection of the agent takes over. It is
// recorded as an event even when the agent has no connection.
func (b *Band) Supersede(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	const why = "this connection was superseded"
	for _, c := range b.sockets.byAgent[agentID] {
		b.supersedeLocked(c, why)
	}
	b.truth.record(Event{Kind: EventSupersede, AgentID: agentID, Detail: why})
}

// DropSockets closes the agent's connections at once, with no push and
// no close handshake, as a network failure would. The event's Detail is
// how many connections it closed.
func (b *Band) DropSockets(agentID string) {
	b.mu.Lock()
	conns := b.sockets.byAgent[agentID]
	delete(b.sockets.byAgent, agentID)
	b.truth.record(Event{Kind: EventDrop, AgentID: agentID, Detail: strconv.Itoa(len(conns))})
	b.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}
