package fakeband

import (
	"encoding/json"
	"net/http"
	"slices"
)

// What the admin API reads back: the cast (setup) and the ground truth.
// Both are taken under one lock, so each is a consistent snapshot.

type personJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Handle      string `json:"handle"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"` // agents only
	APIKey      string `json:"api_key"`
}

type memberJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Role string `json:"role"`
}

type roomSetupJSON struct {
	ID      string       `json:"id"`
	Title   string       `json:"title"`
	OwnerID string       `json:"owner_id"`
	Members []memberJSON `json:"members"`
}

func (b *Band) membersLocked(r *room) []memberJSON {
	out := make([]memberJSON, 0, len(r.order))
	for _, pid := range r.order {
		p := b.participants[pid]
		out = append(out, memberJSON{ID: p.id, Name: p.name, Type: p.kind, Role: r.roles[pid]})
	}
	return out
}

type setupJSON struct {
	RESTURL   string          `json:"rest_url"`
	SocketURL string          `json:"socket_url"`
	AdminURL  string          `json:"admin_url"`
	Owner     personJSON      `json:"owner"`
	Humans    []personJSON    `json:"humans"`
	Agents    []personJSON    `json:"agents"`
	Rooms     []roomSetupJSON `json:"rooms"`
}

func personOf(p *participant) personJSON {
	return personJSON{ID: p.id, Name: p.name, Handle: p.handle, Type: p.kind, Description: p.description, APIKey: p.key}
}

// adminSetup lists who is here. The URLs are the ones the caller reached
// the admin API through, so they work from where the caller stands.
func (b *Band) adminSetup(r *http.Request) (int, any, *Error) {
	root := "http://" + r.Host
	out := setupJSON{
		RESTURL:   root + APIPrefix,
		SocketURL: "ws://" + r.Host + APIPrefix + "/socket/websocket",
		AdminURL:  root + AdminPrefix,
		Humans:    []personJSON{},
		Agents:    []personJSON{},
		Rooms:     []roomSetupJSON{},
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out.Owner = personOf(b.owner)
	for _, p := range b.people {
		switch {
		case p == b.owner:
		case p.isAgent():
			out.Agents = append(out.Agents, personOf(p))
		default:
			out.Humans = append(out.Humans, personOf(p))
		}
	}
	for _, id := range b.roomOrder {
		rm := b.rooms[id]
		out.Rooms = append(out.Rooms, roomSetupJSON{ID: rm.id, Title: rm.title, OwnerID: rm.ownerID, Members: b.membersLocked(rm)})
	}
	return http.StatusOK, out, nil
}

type postJSON struct {
	Seq        int      `json:"seq"`
	ID         string   `json:"id"`
	SenderID   string   `json:"sender_id"`
	SenderType string   `json:"sender_type"`
	Content    string   `json:"content"`
	Mentions   []string `json:"mentions"`
}

// chatEventJSON is ChatEvent with JSON names.
type chatEventJSON struct {
	Seq         int             `json:"seq"`
	ID          string          `json:"id"`
	SenderID    string          `json:"sender_id"`
	MessageType string          `json:"message_type"`
	Content     string          `json:"content"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

type roomTruthJSON struct {
	ID           string          `json:"id"`
	Title        string          `json:"title"`
	Participants []memberJSON    `json:"participants"`
	Posts        []postJSON      `json:"posts"`
	ChatEvents   []chatEventJSON `json:"chat_events"`
	// Tasks are the room's board, with each task's comments; Goal its
	// goal (null while none is set).
	Tasks []taskTruthJSON `json:"tasks"`
	Goal  *Board          `json:"goal"`
}

type taskTruthJSON struct {
	Seq            int              `json:"seq"`
	ID             string           `json:"id"`
	Number         int              `json:"number"`
	CreatorID      string           `json:"creator_id"`
	Subject        string           `json:"subject"`
	Detail         string           `json:"detail"`
	State          string           `json:"state"`
	SupersededByID string           `json:"superseded_by_id,omitempty"`
	Comments       []TaskComment    `json:"comments"`
	Assignments    []TaskAssignment `json:"assignments"`
}

type memoryTruthJSON struct {
	Seq           int             `json:"seq"`
	ID            string          `json:"id"`
	SourceAgentID string          `json:"source_agent_id"`
	Content       string          `json:"content"`
	Status        string          `json:"status"`
	Scope         string          `json:"scope"`
	SubjectID     string          `json:"subject_id,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

type deliveryJSON struct {
	RecipientID string `json:"recipient_id"`
	RoomID      string `json:"room_id"`
	MessageID   string `json:"message_id"`
	Status      string `json:"status"`
	Attempts    int    `json:"attempts"`
}

type executionTruthJSON struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	RoomID  string `json:"room_id"`
	Stopped bool   `json:"stopped"`
	Working bool   `json:"working"` // the agent's last /activity report
}

// markTruthJSON is Mark with JSON names; the conversion keeps them in step.
type markTruthJSON struct {
	Seq       int    `json:"seq"`
	AgentID   string `json:"agent_id"`
	RoomID    string `json:"room_id"`
	MessageID string `json:"message_id"`
	Kind      string `json:"kind"`
	Attempt   int    `json:"attempt"`
	Error     string `json:"error,omitempty"`
}

// eventJSON is Event with JSON names; the conversion keeps them in step.
type eventJSON struct {
	Seq       int    `json:"seq"`
	Kind      string `json:"kind"`
	AgentID   string `json:"agent_id,omitempty"`
	RoomID    string `json:"room_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

type truthJSON struct {
	Rooms       []roomTruthJSON      `json:"rooms"`
	Deliveries  []deliveryJSON       `json:"deliveries"`
	Executions  []executionTruthJSON `json:"executions"`
	Marks       []markTruthJSON      `json:"marks"`
	Events      []eventJSON          `json:"events"`
	Requests    map[Endpoint]int     `json:"requests"`
	FaultsFired map[string]int       `json:"faults_fired"`
	// Memories are every memory stored, in order.
	Memories []memoryTruthJSON `json:"memories"`
}

// adminTruth is the ground truth: every post, the final delivery status
// of every message for every recipient, the executions' stop state, every
// mark and event in the global order, and the request counts.
func (b *Band) adminTruth(*http.Request) (int, any, *Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := truthJSON{
		Rooms: []roomTruthJSON{}, Deliveries: []deliveryJSON{}, Executions: []executionTruthJSON{},
		Marks: []markTruthJSON{}, Events: []eventJSON{},
		Requests: map[Endpoint]int{}, FaultsFired: b.faultsLocked().Fired, Memories: []memoryTruthJSON{},
	}
	for _, m := range b.memories {
		out.Memories = append(out.Memories, memoryTruthJSON{Seq: m.Seq, ID: m.ID, SourceAgentID: m.SourceAgentID, Content: m.Content,
			Status: m.Status, Scope: m.Scope, SubjectID: m.SubjectID, Metadata: m.Metadata})
	}
	for k, v := range b.truth.reqs {
		out.Requests[k] = v
	}
	for _, id := range b.roomOrder {
		rm := b.rooms[id]
		rt := roomTruthJSON{ID: rm.id, Title: rm.title, Participants: b.membersLocked(rm), Posts: []postJSON{}, ChatEvents: []chatEventJSON{}, Tasks: []taskTruthJSON{}}
		for _, t := range b.tasks[rm.id] {
			rt.Tasks = append(rt.Tasks, taskTruthJSON{Seq: t.Seq, ID: t.ID, Number: t.Number, CreatorID: t.CreatorID, Subject: t.Subject,
				Detail: t.Detail, State: t.State, SupersededByID: t.SupersededByID,
				Comments: append([]TaskComment{}, t.Comments...), Assignments: append([]TaskAssignment{}, t.Assignments...)})
		}
		if bd := b.boards[rm.id]; bd != nil && bd.set {
			goal := bd.Board
			rt.Goal = &goal
		}
		for _, e := range b.truth.chatEvents[rm.id] {
			rt.ChatEvents = append(rt.ChatEvents, chatEventJSON{
				Seq: e.Seq, ID: e.ID, SenderID: e.SenderID, MessageType: e.MessageType, Content: e.Content, Metadata: e.Metadata,
			})
		}
		for _, p := range b.truth.posts[rm.id] {
			rt.Posts = append(rt.Posts, postJSON{
				Seq: p.Seq, ID: p.ID, SenderID: p.SenderID, SenderType: p.SenderType,
				Content: p.Content, Mentions: append([]string{}, p.Mentions...),
			})
		}
		out.Rooms = append(out.Rooms, rt)
		for _, m := range rm.messages {
			for _, rid := range m.recipients {
				d := b.deliveries[deliveryKey{rid, m.id}]
				out.Deliveries = append(out.Deliveries, deliveryJSON{
					RecipientID: rid, RoomID: rm.id, MessageID: m.id, Status: d.status, Attempts: d.attempts,
				})
			}
		}
		for _, pid := range rm.order {
			if e := b.executions[pairKey{pid, rm.id}]; e != nil {
				out.Executions = append(out.Executions, executionTruthJSON{ID: e.id, AgentID: pid, RoomID: rm.id, Stopped: e.stopped, Working: e.working})
			}
		}
	}
	for _, marks := range b.truth.marks {
		for _, m := range marks {
			out.Marks = append(out.Marks, markTruthJSON(m))
		}
	}
	slices.SortFunc(out.Marks, func(a, b markTruthJSON) int { return a.Seq - b.Seq })
	for _, e := range b.truth.events {
		out.Events = append(out.Events, eventJSON(e))
	}
	return http.StatusOK, out, nil
}
