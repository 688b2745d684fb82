package fakeband

import (
	"strconv"
	"strings"
	"unicode"
)

// Agent is an agent participant. Key is its X-API-Key.
type Agent struct{ ID, Key, Name, Handle string }

// Human is a human participant (a Band user). Key is its X-API-Key for
// the /me endpoints.
type Human struct{ ID, Key, Name, Handle string }

// Room is a chat room.
type Room struct{ ID, Title string }

// Owner returns the operator human who owns every agent of this Band; only
// it may list and interrupt agents' executions over HTTP.
func (b *Band) Owner() Human {
	b.mu.Lock()
	defer b.mu.Unlock()
	return humanOf(b.owner)
}

// AddAgent registers an agent. Its handle is "owner/<slug of name>",
// made unique with a numeric suffix. Band registers every agent with a
// description (its official Python SDK refuses to start without one), so
// the agent gets DefaultDescription(name) until SetDescription changes it.
func (b *Band) AddAgent(name string) Agent {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.addParticipantLocked(name, typeAgent)
	p.description = DefaultDescription(name)
	return Agent{ID: p.id, Key: p.key, Name: p.name, Handle: p.handle}
}

// DefaultDescription is the description a new agent is registered with.
func DefaultDescription(name string) string {
	return name + ", an agent on the fake Band"
}

// SetDescription changes an agent's description, as its owner can on
// Band; GET /agent/me answers it from then on. An empty description is
// allowed, to try an agent the way Band's SDKs see one without it.
func (b *Band) SetDescription(agentID, description string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.participants[agentID]
	if p == nil || !p.isAgent() {
		return notFound("agent")
	}
	p.description = description
	return nil
}

// AddHuman registers a human. Its handle is the slug of name, made unique.
func (b *Band) AddHuman(name string) Human {
	b.mu.Lock()
	defer b.mu.Unlock()
	return humanOf(b.addParticipantLocked(name, typeUser))
}

func humanOf(p *participant) Human {
	return Human{ID: p.id, Key: p.key, Name: p.name, Handle: p.handle}
}

func (b *Band) addParticipantLocked(name, kind string) *participant {
	p := &participant{id: b.ids.uuid(), name: name, kind: kind, at: b.stamp()}
	prefix, handle := "band_u_", slug(name)
	if kind == typeAgent {
		prefix, handle = "band_a_", b.owner.handle+"/"+handle
	}
	p.key = b.ids.key(prefix)
	p.handle = handle
	for n := 2; b.byHandle[p.handle] != nil; n++ {
		p.handle = handle + "-" + strconv.Itoa(n)
	}
	b.participants[p.id] = p
	b.people = append(b.people, p)
	b.byKey[p.key] = p
	b.byHandle[p.handle] = p
	return p
}

// slug lowercases name and turns every run of other characters into one
// dash, because Band handles never contain whitespace.
func slug(name string) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			sb.WriteRune(r)
			dash = false
		} else if !dash && sb.Len() > 0 {
			sb.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimSuffix(sb.String(), "-")
	if s == "" {
		s = "anon"
	}
	return s
}

// AddRoom creates a room owned by owner, with the given participants as
// members. Ids that name no known participant are skipped (use
// AddParticipant to get an error instead); an unknown owner leaves the
// room without one, so only StopRoom and PlayRoom can control it. Every
// agent in the room gets room_added on agent_rooms:{agent_id}.
func (b *Band) AddRoom(title string, owner Human, participantIDs ...string) Room {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.newRoomLocked(title, "")
	if p := b.participants[owner.ID]; p != nil {
		r.ownerID = p.id
		b.joinLocked(r, p, RoleOwner)
	}
	for _, id := range participantIDs {
		if p := b.participants[id]; p != nil && !r.has(id) {
			b.joinLocked(r, p, RoleMember)
		}
	}
	return Room{ID: r.id, Title: r.title}
}

// Participant roles as Band spells them.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// AddParticipant adds a member to a room; see AddParticipantAs.
func (b *Band) AddParticipant(roomID, participantID string) error {
	return b.AddParticipantAs(roomID, participantID, RoleMember)
}

// AddParticipantAs adds a participant to a room with a role (owner, admin
// or member), as a room owner does on Band: the room's agents get
// participant_added on room_participants:{room}, and an added agent gets
// room_added on agent_rooms:{agent}. Adding someone already in the room
// does nothing.
func (b *Band) AddParticipantAs(roomID, participantID, role string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rooms[roomID]
	if r == nil {
		return notFound("chat room")
	}
	p := b.participants[participantID]
	if p == nil {
		return notFound("participant")
	}
	if !validRole(role) {
		return unprocessable("validation_error", "role must be owner, admin or member", "/participant/role", "is invalid")
	}
	if !r.has(p.id) {
		b.joinLocked(r, p, role)
	}
	return nil
}

func validRole(role string) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleMember
}

// RemoveParticipant takes a participant out of a room: the room's agents
// (the removed one included) get participant_removed on
// room_participants:{room}, and a removed agent gets room_removed. Its
// deliveries and stop state are kept for a later rejoin.
func (b *Band) RemoveParticipant(roomID, participantID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rooms[roomID]
	if r == nil {
		return notFound("chat room")
	}
	if !r.has(participantID) {
		return notFound("participant")
	}
	b.leaveLocked(r, b.participants[participantID])
	return nil
}

// joinLocked adds p to r, tells the room's agents and, for an agent,
// creates its execution and tells it.
// newRoomLocked creates an empty room.
func (b *Band) newRoomLocked(title, taskID string) *room {
	r := &room{id: b.ids.uuid(), title: title, taskID: taskID, roles: map[string]string{}, at: b.stamp()}
	b.rooms[r.id] = r
	b.roomOrder = append(b.roomOrder, r.id)
	b.truth.record(Event{Kind: EventRoom, RoomID: r.id, Detail: title})
	return r
}

func (b *Band) joinLocked(r *room, p *participant, role string) {
	r.roles[p.id] = role
	r.order = append(r.order, p.id)
	b.truth.record(Event{Kind: EventJoin, AgentID: p.id, RoomID: r.id, Detail: role})
	b.pushParticipantsLocked(r, "participant_added", participantAddedJSON{
		ID: p.id, Name: p.name, Type: p.kind, Handle: p.handle, Description: p.description,
	})
	if !p.isAgent() {
		return
	}
	k := pairKey{p.id, r.id}
	if b.executions[k] == nil {
		b.executions[k] = &execution{id: b.ids.uuid(), agentID: p.id, roomID: r.id}
	}
	b.pushRoomLocked(p.id, "room_added", r)
}

// leaveLocked takes p out of r. The push goes out before p leaves, so a
// removed agent still subscribed to the room hears it too.
func (b *Band) leaveLocked(r *room, p *participant) {
	b.pushParticipantsLocked(r, "participant_removed", participantRemovedJSON{ID: p.id})
	delete(r.roles, p.id)
	for i, id := range r.order {
		if id == p.id {
			r.order = append(r.order[:i:i], r.order[i+1:]...)
			break
		}
	}
	b.truth.record(Event{Kind: EventLeave, AgentID: p.id, RoomID: r.id})
	if p.isAgent() {
		b.pushRoomLocked(p.id, "room_removed", r)
	}
}

// memberRoom returns the room if it exists and p is in it; Band answers
// both "no such room" and "not a participant" with the same 404.
func (b *Band) memberRoom(roomID string, p *participant) (*room, *Error) {
	r := b.rooms[roomID]
	if r == nil || !r.has(p.id) {
		return nil, notFound("chat room")
	}
	return r, nil
}

func (b *Band) stoppedLocked(agentID, roomID string) bool {
	e := b.executions[pairKey{agentID, roomID}]
	return e != nil && e.stopped
}
