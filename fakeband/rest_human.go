package fakeband

import (
	"net/http"
	"time"
)

func (b *Band) humanRoutes() []route {
	return []route{
		{"POST /api/v1/me/chats/{chat_id}/messages", EndpointHumanPost, humanSide, b.postOverHTTP},
		{"POST /api/v1/me/chats/{chat_id}/agents/stop", EndpointControl, humanSide, b.serveRoomControl(true)},
		{"POST /api/v1/me/chats/{chat_id}/agents/play", EndpointControl, humanSide, b.serveRoomControl(false)},
		{"GET /api/v1/me/agents/{agent_id}/executions", EndpointControl, humanSide, b.serveExecutions},
		{"POST /api/v1/me/agents/{agent_id}/executions/{execution_id}/interrupt", EndpointControl, humanSide, b.serveInterrupt},
	}
}

type roomControlJSON struct {
	ID       string   `json:"id"`
	Mode     string   `json:"mode"`
	AgentIDs []string `json:"agent_ids"`
}

type executionJSON struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"` // running or stopped
	RoomID    string     `json:"room_id"`
	StoppedAt *time.Time `json:"stopped_at"`
}

func renderExecution(e *execution) executionJSON {
	out := executionJSON{ID: e.id, Status: "running", RoomID: e.roomID}
	if e.stopped {
		at := e.stoppedAt
		out.Status, out.StoppedAt = "stopped", &at
	}
	return out
}

// serveRoomControl is the room owner's stop or play; it fans out to every
// agent in the room.
func (b *Band) serveRoomControl(stop bool) func(c *call) reply {
	return func(c *call) reply {
		b.mu.Lock()
		defer b.mu.Unlock()
		r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
		if err != nil {
			return errReply(err)
		}
		if r.ownerID != c.who.id {
			return errReply(forbidden("only the chat owner may stop or play its agents"))
		}
		mode := modePlay
		if stop {
			mode = modeStop
		}
		return okReply(http.StatusOK, roomControlJSON{ID: r.id, Mode: mode, AgentIDs: b.setRoomStoppedLocked(r, stop)})
	}
}

// ownedAgent finds the path's agent and checks the caller owns it.
func (b *Band) ownedAgent(c *call) (*participant, *Error) {
	p := b.participants[c.r.PathValue("agent_id")]
	if p == nil || !p.isAgent() {
		return nil, notFound("agent")
	}
	if c.who != b.owner {
		return nil, forbidden("only the agent's owner may manage its executions")
	}
	return p, nil
}

func (b *Band) serveExecutions(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	agent, err := b.ownedAgent(c)
	if err != nil {
		return errReply(err)
	}
	out := []executionJSON{}
	for _, id := range b.roomOrder {
		if e := b.executions[pairKey{agent.id, id}]; e != nil && b.rooms[id].has(agent.id) {
			out = append(out, renderExecution(e))
		}
	}
	return okReply(http.StatusOK, out)
}

// serveInterrupt is the agent-scope interrupt: it reaches the agent with
// room_id null, so the agent aborts its turn in every room.
func (b *Band) serveInterrupt(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	agent, err := b.ownedAgent(c)
	if err != nil {
		return errReply(err)
	}
	var exec *execution
	for k, e := range b.executions {
		if k.agentID == agent.id && e.id == c.r.PathValue("execution_id") {
			exec = e
		}
	}
	if exec == nil {
		return errReply(notFound("execution"))
	}
	b.pushControlLocked(EventInterrupt, controlJSON{Mode: modeInterrupt, Scope: scopeAgent, AgentID: agent.id, ExecutionID: &exec.id})
	return okReply(http.StatusOK, renderExecution(exec))
}
