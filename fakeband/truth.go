package fakeband

import (
	"encoding/json"
	"slices"
)

// Post is one stored message as the fake holds it. Content is the stored
// form (mention markers included); Mentions are the ids of the kind=mention
// entries, the participants it was delivered to.
type Post struct {
	Seq                                       int
	ID, RoomID, SenderID, SenderType, Content string
	Mentions                                  []string
}

// Mark is one applied lifecycle call. Kind is processing, processed or
// failed; Attempt is the attempt it opened or closed; Error is failed's
// reason. Refused calls (422, 404) are not marks.
type Mark struct {
	Seq                              int
	AgentID, RoomID, MessageID, Kind string
	Attempt                          int
	Error                            string
}

// ChatEvent is one event an agent posted (POST .../events): a message of
// one of the six event types that mentions no one. Metadata is the event's
// metadata object as stored (compacted), nil when it had none.
type ChatEvent struct {
	Seq                                        int
	ID, RoomID, SenderID, MessageType, Content string
	Metadata                                   json.RawMessage
}

// Event is one applied change, in the Band's single global order. AgentID
// is the agent concerned, or the participant for join, leave and post.
type Event struct {
	Seq                                int
	Kind                               string
	AgentID, RoomID, MessageID, Detail string
}

// Event kinds.
const (
	EventRoom           = "room"            // a room was created; Detail is its title
	EventJoin           = "join"            // a participant joined; Detail is its role
	EventLeave          = "leave"           // a participant left
	EventPost           = "post"            // a message was stored; Detail is the sender type
	EventMark           = "mark"            // a lifecycle call applied; Detail is the mark kind
	EventStop           = "stop"            // an execution was stopped; Detail is the correlation id
	EventPlay           = "play"            // an execution was resumed; Detail is the correlation id
	EventInterrupt      = "interrupt"       // an interrupt was pushed; Detail is the correlation id
	EventSupersede      = "supersede"       // an agent's sockets were superseded; Detail is the message
	EventConnect        = "connect"         // an agent's socket connected
	EventDrop           = "drop"            // DropSockets ran; Detail is how many connections it closed
	EventChatEvent      = "chat_event"      // an agent posted an event; Detail is its message_type
	EventActivity       = "activity"        // an agent reported /activity; Detail is working or idle
	EventContactAdded   = "contact_added"   // a contact of the agent was added; Detail is the participant id
	EventContactRemoved = "contact_removed" // a contact of the agent was removed; Detail is the participant id
	EventMemory         = "memory"          // an agent stored a memory; Detail is its id
	EventMemoryStatus   = "memory_status"   // a memory was superseded or archived; Detail is its id and status
	EventTask           = "task"            // a task was created on a room's board; Detail is its id
	EventTaskComment    = "task_comment"    // a comment was posted on a task; Detail is the task's id
	EventBoard          = "board"           // a room's goal changed; Detail is its title
	EventRename         = "rename"          // a room was renamed; Detail is its new title
	EventContactRequest = "contact_request" // a contact request was sent (Detail: the recipient) or answered (Detail: its id and status)
)

// truth is the ground-truth record. Callers hold b.mu.
type truth struct {
	seq        int
	events     []Event
	posts      map[string][]Post      // by room
	chatEvents map[string][]ChatEvent // by room
	marks      map[deliveryKey][]Mark // by (agent, message)
	reqs       map[Endpoint]int
	// feed, when on, hears every recorded event (see feed.go).
	feed *feed
}

func (t *truth) init() {
	t.posts = map[string][]Post{}
	t.chatEvents = map[string][]ChatEvent{}
	t.marks = map[deliveryKey][]Mark{}
	t.reqs = map[Endpoint]int{}
}

// record appends e with the next sequence number and returns that number.
func (t *truth) record(e Event) int {
	t.seq++
	e.Seq = t.seq
	t.events = append(t.events, e)
	if t.feed != nil {
		t.feed.publishLocked(FeedEvent{Seq: e.Seq, Kind: e.Kind, AgentID: e.AgentID, RoomID: e.RoomID, MessageID: e.MessageID, Detail: e.Detail})
	}
	return t.seq
}

// Posts returns every message of the room, oldest first.
func (b *Band) Posts(roomID string) []Post {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.truth.posts[roomID])
	for i := range out {
		out[i].Mentions = slices.Clone(out[i].Mentions)
	}
	return out
}

// ChatEvents returns every event posted in the room, oldest first.
func (b *Band) ChatEvents(roomID string) []ChatEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.truth.chatEvents[roomID])
	for i := range out {
		out[i].Metadata = slices.Clone(out[i].Metadata)
	}
	return out
}

// Member is a participant of a room as the truth reports it.
type Member struct {
	ID, Name, Handle, Type, Role string
}

// Members returns the room's participants in join order, or nil for an
// unknown room.
func (b *Band) Members(roomID string) []Member {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rooms[roomID]
	if r == nil {
		return nil
	}
	out := make([]Member, 0, len(r.order))
	for _, id := range r.order {
		p := b.participants[id]
		out = append(out, Member{ID: p.id, Name: p.name, Handle: p.handle, Type: p.kind, Role: r.roles[id]})
	}
	return out
}

// Working reports the agent's last /activity report in the room: true
// after {"working": true} until {"working": false}. The fake keeps no
// expiry (Band clears the indicator about 10 s after the last true).
func (b *Band) Working(agentID, roomID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.executions[pairKey{agentID, roomID}]
	return e != nil && e.working
}

// Marks returns the agent's applied marks on the message, in order.
func (b *Band) Marks(agentID, messageID string) []Mark {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.truth.marks[deliveryKey{agentID, messageID}])
}

// Status returns the agent's delivery status of the message: "" when it
// was never delivered to the agent, else delivered, processing, processed
// or failed.
func (b *Band) Status(agentID, messageID string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deliveries[deliveryKey{agentID, messageID}]; d != nil {
		return d.status
	}
	return ""
}

// Requests counts the requests per endpoint, faulted and refused ones
// included.
func (b *Band) Requests() map[Endpoint]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[Endpoint]int, len(b.truth.reqs))
	for k, v := range b.truth.reqs {
		out[k] = v
	}
	return out
}

// Events returns every applied change in one global order.
func (b *Band) Events() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.truth.events)
}

// LastEvent is the latest applied change (the last of Events), without a
// copy of the log; the zero Event before the first.
func (b *Band) LastEvent() Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.truth.events) == 0 {
		return Event{}
	}
	return b.truth.events[len(b.truth.events)-1]
}

// Stopped reports whether the agent's execution in the room is stopped.
func (b *Band) Stopped(agentID, roomID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stoppedLocked(agentID, roomID)
}
