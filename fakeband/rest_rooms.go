package fakeband

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// chatTitleMax is Band's limit on a room's title, in characters.
const chatTitleMax = 120

// serveCreateChat creates a room with the agent as its owner: the agent
// gets room_added, as for any room it joins. A blank or absent title
// leaves the room untitled (Band then titles it from its first message).
func (b *Band) serveCreateChat(c *call) reply {
	var body struct {
		Chat *struct {
			Title  *string `json:"title"`
			TaskID *string `json:"task_id"`
		} `json:"chat"`
	}
	if err := decodeBody(c.r, &body); err != nil || body.Chat == nil {
		return errReply(unprocessable("validation_error", `body must be {"chat": {"title"?, "task_id"?}}`, "/chat", "is invalid"))
	}
	var title, taskID string
	if t := body.Chat.Title; t != nil {
		if strings.ContainsAny(*t, "\n\r\x00") {
			return errReply(unprocessable("validation_error", "title must not contain control characters", "/chat/title", "is invalid"))
		}
		title = strings.TrimSpace(*t)
		if utf8.RuneCountInString(title) > chatTitleMax {
			return errReply(unprocessable("validation_error", "title is longer than 120 characters", "/chat/title", "should be at most 120 character(s)"))
		}
	}
	if id := body.Chat.TaskID; id != nil {
		if !isUUID(*id) {
			return errReply(unprocessable("validation_error", "task_id must be a UUID", "/chat/task_id", "is invalid"))
		}
		taskID = *id
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.newRoomLocked(title, taskID)
	r.ownerID = c.who.id
	b.joinLocked(r, c.who, RoleOwner)
	b.created = append(b.created, CreatedRoom{ID: r.id, OwnerID: c.who.id, Title: title})
	return okReply(http.StatusCreated, renderRoom(r))
}

// CreatedRoom is a room an agent created (POST /agent/chats), with the
// title it was created with.
type CreatedRoom struct {
	ID, OwnerID, Title string
}

// CreatedRooms returns the rooms agents created, in the order they were
// created.
func (b *Band) CreatedRooms() []CreatedRoom {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.created)
}

// servePeers lists whom the agent may recruit: its owner and its sibling
// agents (every agent of the fake shares the one operator), and its
// contacts (Band.AddContact), never itself. not_in_chat leaves out the
// participants of that room when the agent is in it; the fake has no
// global agents.
func (b *Band) servePeers(c *call) reply {
	q := c.r.URL.Query()
	page, err := intParam(q, "page", 1, 0)
	if err != nil {
		return errReply(err)
	}
	size, err := intParam(q, "page_size", chatsPageSizeDefault, maxPageSize)
	if err != nil {
		return errReply(err)
	}
	notIn := q.Get("not_in_chat")
	if notIn != "" && !isUUID(notIn) {
		return errReply(unprocessable("validation_error", "not_in_chat must be a UUID", "/not_in_chat", "is invalid"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var exclude *room
	if r := b.rooms[notIn]; r != nil && r.has(c.who.id) {
		exclude = r
	}
	contacts := b.contacts[c.who.id]
	var peers []*participant
	for _, p := range b.people {
		registry := p == b.owner || p.isAgent()
		if p == c.who || (!registry && !contacts[p.id]) || (exclude != nil && exclude.has(p.id)) {
			continue
		}
		peers = append(peers, p)
	}
	meta := pageMetaJSON{Page: page, PageSize: size, TotalCount: len(peers), TotalPages: (len(peers) + size - 1) / size}
	items := []peerJSON{}
	if page <= meta.TotalPages {
		start := (page - 1) * size
		for _, p := range peers[start:min(start+size, len(peers))] {
			j := peerJSON{ID: p.id, Name: p.name, Handle: p.handle, Type: p.kind, Source: "registry", IsContact: contacts[p.id]}
			if p != b.owner && !p.isAgent() {
				j.Source = "contact"
			}
			if p.isAgent() {
				d := p.description // copied: the answer is encoded after the lock is released
				j.Description = &d
			}
			items = append(items, j)
		}
	}
	return reply{status: http.StatusOK, data: items, meta: meta}
}

// serveChat reads one room the agent is in.
func (b *Band) serveChat(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("id"), c.who)
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, renderRoom(r))
}

// serveRenameChat renames a room the agent owns and locks its title.
// Renaming to the title it has changes nothing.
func (b *Band) serveRenameChat(c *call) reply {
	var body struct {
		Chat *struct {
			Title *string `json:"title"`
		} `json:"chat"`
	}
	if err := decodeBody(c.r, &body); err != nil || body.Chat == nil || body.Chat.Title == nil {
		return errReply(unprocessable("validation_error", `body must be {"chat": {"title"}}`, "/chat/title", "can't be blank"))
	}
	t := *body.Chat.Title
	title := strings.TrimSpace(t)
	switch {
	case strings.ContainsAny(t, "\n\r\x00"):
		return errReply(unprocessable("validation_error", "title must not contain control characters", "/chat/title", "is invalid"))
	case title == "" || utf8.RuneCountInString(title) > chatTitleMax:
		return errReply(unprocessable("validation_error", "title must be 1..120 characters", "/chat/title", "should be 1 to 120 character(s)"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("id"), c.who)
	if err != nil {
		return errReply(err)
	}
	if r.roles[c.who.id] != RoleOwner {
		return errReply(forbidden("only the room's owner may rename it"))
	}
	if r.title != title {
		r.title = title
		b.truth.record(Event{Kind: EventRename, AgentID: c.who.id, RoomID: r.id, Detail: title})
	}
	return okReply(http.StatusOK, renderRoom(r))
}
