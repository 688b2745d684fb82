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
// made unique with a numeric suffix.
func (b *Band) AddAgent(name string) Agent {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.addParticipantLocked(name, typeAgent)
	return Agent{ID: p.id, Key: p.key, Name: p.name, Handle: p.handle}
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
	r := &room{id: b.ids.uuid(), title: title, roles: map[string]string{}, at: b.stamp()}
	b.rooms[r.id] = r
	b.roomOrder = append(b.roomOrder, r.id)
	b.truth.record(Event{Kind: EventRoom, RoomID: r.id, Detail: title})
	if p := b.participants[owner.ID]; p != nil {
		r.ownerID = p.id
		b.joinLocked(r, p, "owner")
	}
	for _, id := range participantIDs {
		if p := b.participants[id]; p != nil && !r.has(id) {
			b.joinLocked(r, p, "member")
		}
	}
	return Room{ID: r.id, Title: r.title}
}

// AddParticipant adds a member to a room; an agent gets room_added. Adding
// someone already in the room does nothing.
func (b *Band) AddParticipant(roomID, participantID string) error {
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
	if !r.has(p.id) {
		b.joinLocked(r, p, "member")
	}
	return nil
}

// RemoveParticipant takes a participant out of a room; an agent gets
// room_removed. Its deliveries and stop state are kept for a later rejoin.
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
	delete(r.roles, participantID)
	for i, id := range r.order {
		if id == participantID {
			r.order = append(r.order[:i:i], r.order[i+1:]...)
			break
		}
	}
	b.truth.record(Event{Kind: EventLeave, AgentID: participantID, RoomID: r.id})
	if p := b.participants[participantID]; p.isAgent() {
		b.pushRoomLocked(p.id, "room_removed", r)
	}
	return nil
}

func (b *Band) joinLocked(r *room, p *participant, role string) {
	r.roles[p.id] = role
	r.order = append(r.order, p.id)
	b.truth.record(Event{Kind: EventJoin, AgentID: p.id, RoomID: r.id, Detail: role})
	if !p.isAgent() {
		return
	}
	k := pairKey{p.id, r.id}
	if b.executions[k] == nil {
		b.executions[k] = &execution{id: b.ids.uuid(), agentID: p.id, roomID: r.id}
	}
	b.pushRoomLocked(p.id, "room_added", r)
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
