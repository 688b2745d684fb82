package fakeband

import (
	"strconv"
	"time"
)

// controlJSON is the agent.control push on agent_control:{agent_id}.
type controlJSON struct {
	Type          string  `json:"type"`
	Mode          string  `json:"mode"`
	Scope         string  `json:"scope"`
	AgentID       string  `json:"agent_id"`
	RoomID        *string `json:"room_id"`
	ExecutionID   *string `json:"execution_id"`
	Reason        string  `json:"reason"`
	CorrelationID string  `json:"correlation_id"`
}

// Control modes, scopes and the reason every human action carries.
const (
	modeInterrupt = "interrupt"
	modeStop      = "stop"
	modePlay      = "play"
	scopeAgent    = "agent"
	scopeRoom     = "room"
	userRequested = "user_requested"
)

// StopRoom stops every agent in the room, as the room owner's stop does:
// /next answers 204 and posts 403 for them there until PlayRoom, and each
// gets agent.control mode stop. Stopping again pushes again (Band does not
// deduplicate).
func (b *Band) StopRoom(roomID string) error { return b.setRoomStopped(roomID, true) }

// PlayRoom clears the stop of every agent in the room and pushes mode play.
func (b *Band) PlayRoom(roomID string) error { return b.setRoomStopped(roomID, false) }

func (b *Band) setRoomStopped(roomID string, stop bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rooms[roomID]
	if r == nil {
		return notFound("chat room")
	}
	b.setRoomStoppedLocked(r, stop)
	return nil
}

// setRoomStoppedLocked fans the stop or play out to the room's agents and
// returns their ids.
func (b *Band) setRoomStoppedLocked(r *room, stop bool) []string {
	agents := []string{}
	for _, id := range r.order {
		if !b.participants[id].isAgent() {
			continue
		}
		agents = append(agents, id)
		b.setStoppedLocked(r, b.participants[id], stop, scopeRoom)
	}
	return agents
}

// setStoppedLocked stops or plays the agent's execution in the room and
// pushes it with the scope given: room for a room owner's fan-out, agent
// for the operator's stop or play of one execution.
func (b *Band) setStoppedLocked(r *room, p *participant, stop bool, scope string) {
	mode, kind := modePlay, EventPlay
	if stop {
		mode, kind = modeStop, EventStop
	}
	e := b.executions[pairKey{p.id, r.id}]
	e.stopped = stop
	e.stoppedAt = time.Time{}
	if stop {
		e.stoppedAt = b.stamp()
	}
	b.pushControlLocked(kind, controlJSON{Mode: mode, Scope: scope, AgentID: p.id, RoomID: &r.id, ExecutionID: &e.id})
}

// Interrupt pushes an interrupt to the agent. With a roomID it is scoped to
// that room (the agent must be in it); with "" it is agent-wide, room_id
// null, reaching all the agent's rooms. Interrupt changes no state.
func (b *Band) Interrupt(agentID, roomID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.participants[agentID]
	if p == nil || !p.isAgent() {
		return notFound("agent")
	}
	if roomID == "" {
		b.pushControlLocked(EventInterrupt, controlJSON{Mode: modeInterrupt, Scope: scopeAgent, AgentID: agentID})
		return nil
	}
	r, err := b.memberRoom(roomID, p)
	if err != nil {
		return err
	}
	e := b.executions[pairKey{agentID, r.id}]
	b.pushControlLocked(EventInterrupt, controlJSON{Mode: modeInterrupt, Scope: scopeRoom, AgentID: agentID, RoomID: &r.id, ExecutionID: &e.id})
	return nil
}

// pushControlLocked stamps a correlation id, records the action and pushes it.
func (b *Band) pushControlLocked(kind string, c controlJSON) {
	b.nCtl++
	c.Type = "agent.control"
	c.Reason = userRequested
	c.CorrelationID = "ctl-" + strconv.Itoa(b.nCtl)
	ev := Event{Kind: kind, AgentID: c.AgentID, Detail: c.CorrelationID}
	if c.RoomID != nil {
		ev.RoomID = *c.RoomID
	}
	b.truth.record(ev)
	b.pushLocked(c.AgentID, "agent_control:"+c.AgentID, "agent.control", c)
}
