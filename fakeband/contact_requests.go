package fakeband

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// contactRequest is a request from one participant to another to become
// contacts.
type contactRequest struct {
	id       string
	from, to *participant
	message  *string
	status   string // pending, approved, rejected, cancelled
	at       time.Time
}

type contactJSON struct {
	ID                string    `json:"id"`
	Handle            string    `json:"handle"`
	Name              string    `json:"name"`
	Type              string    `json:"type"`
	IsExternal        bool      `json:"is_external"`
	ListedInDirectory bool      `json:"listed_in_directory"`
	Tags              []string  `json:"tags"`
	InsertedAt        time.Time `json:"inserted_at"`
}

type receivedRequestJSON struct {
	ID         string    `json:"id"`
	FromHandle string    `json:"from_handle"`
	FromName   string    `json:"from_name"`
	Message    *string   `json:"message"`
	Status     string    `json:"status"`
	InsertedAt time.Time `json:"inserted_at"`
}

type sentRequestJSON struct {
	ID         string    `json:"id"`
	ToHandle   string    `json:"to_handle"`
	ToName     string    `json:"to_name"`
	Message    *string   `json:"message"`
	Status     string    `json:"status"`
	InsertedAt time.Time `json:"inserted_at"`
}

type requestUpdatedJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// pendingLocked finds the pending request from one participant to
// another.
func (b *Band) pendingLocked(from, to *participant) *contactRequest {
	for _, r := range b.contactRequests {
		if r.from == from && r.to == to && r.status == "pending" {
			return r
		}
	}
	return nil
}

// serveAddContact resolves a handle and sends it a contact request:
// pending, or approved at once when the other side had asked already. A
// second add while one is pending, or of a contact, is a 409.
func (b *Band) serveAddContact(c *call) reply {
	var body struct {
		Handle  *string `json:"handle"`
		Message *string `json:"message"`
	}
	if err := decodeBody(c.r, &body); err != nil || body.Handle == nil || isBlank(*body.Handle) {
		return errReply(&Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "handle is required"})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	other := b.byHandle[strings.TrimPrefix(strings.TrimSpace(*body.Handle), "@")]
	switch {
	case other == nil:
		return errReply(notFound("handle"))
	case other == c.who:
		return errReply(&Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "an agent cannot add itself"})
	case b.contacts[c.who.id][other.id]:
		return errReply(&Error{Status: http.StatusConflict, Code: "conflict", Message: "already a contact"})
	case b.pendingLocked(c.who, other) != nil:
		return errReply(&Error{Status: http.StatusConflict, Code: "conflict", Message: "a contact request is already pending"})
	}
	if inverse := b.pendingLocked(other, c.who); inverse != nil {
		inverse.status = "approved"
		b.befriendLocked(c.who, other)
		b.notifyRequestLocked(inverse)
		return okReply(http.StatusCreated, requestUpdatedJSON{ID: inverse.id, Status: "approved"})
	}
	r := &contactRequest{id: b.ids.uuid(), from: c.who, to: other, message: body.Message, status: "pending", at: b.stamp()}
	b.contactRequests = append(b.contactRequests, r)
	b.truth.record(Event{Kind: EventContactRequest, AgentID: c.who.id, Detail: other.id})
	if other.isAgent() {
		b.pushLocked(other.id, "agent_contacts:"+other.id, "contact_request_received", receivedRequestJSON{
			ID: r.id, FromHandle: c.who.handle, FromName: c.who.name, Message: r.message, Status: r.status, InsertedAt: r.at})
	}
	return okReply(http.StatusCreated, requestUpdatedJSON{ID: r.id, Status: "pending"})
}

// befriendLocked makes the two contacts of each other, where agents.
func (b *Band) befriendLocked(p, q *participant) {
	for _, pair := range [][2]*participant{{p, q}, {q, p}} {
		if pair[0].isAgent() {
			b.addContactLocked(pair[0], pair[1])
		}
	}
}

// notifyRequestLocked tells an agent that sent r how it was answered.
func (b *Band) notifyRequestLocked(r *contactRequest) {
	if r.from.isAgent() {
		b.pushLocked(r.from.id, "agent_contacts:"+r.from.id, "contact_request_updated", requestUpdatedJSON{ID: r.id, Status: r.status})
	}
}

// serveRespondContact approves or rejects a request the agent received,
// or cancels one it sent, named by the other party's handle or the
// request's id; a request no longer pending is a 409.
func (b *Band) serveRespondContact(c *call) reply {
	var body struct {
		Action    string `json:"action"`
		Handle    string `json:"handle"`
		RequestID string `json:"request_id"`
	}
	if err := decodeBody(c.r, &body); err != nil || !slices.Contains([]string{"approve", "reject", "cancel"}, body.Action) ||
		(body.Handle == "") == (body.RequestID == "") {
		return errReply(&Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "action (approve, reject, cancel) and one of handle or request_id are required"})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sent := body.Action == "cancel"
	var found *contactRequest
	for _, r := range b.contactRequests {
		mine, other := r.to, r.from
		if sent {
			mine, other = r.from, r.to
		}
		if mine == c.who && (r.id == body.RequestID || (body.Handle != "" && other.handle == strings.TrimPrefix(body.Handle, "@"))) {
			found = r
			if r.status == "pending" {
				break
			}
		}
	}
	switch {
	case found == nil:
		return errReply(notFound("contact request"))
	case found.status != "pending":
		return errReply(&Error{Status: http.StatusConflict, Code: "conflict", Message: "the contact request is already " + found.status})
	}
	found.status = map[string]string{"approve": "approved", "reject": "rejected", "cancel": "cancelled"}[body.Action]
	if found.status == "approved" {
		b.befriendLocked(found.from, found.to)
	}
	if !sent {
		b.notifyRequestLocked(found)
	}
	b.truth.record(Event{Kind: EventContactRequest, AgentID: c.who.id, Detail: found.id + " " + found.status})
	return okReply(http.StatusOK, requestUpdatedJSON{ID: found.id, Status: found.status})
}

// serveRemoveContact ends a contact, named by handle or by the contact's
// id (the fake's contact id is the participant's), in both directions.
func (b *Band) serveRemoveContact(c *call) reply {
	var body struct {
		Handle    string `json:"handle"`
		ContactID string `json:"contact_id"`
	}
	if err := decodeBody(c.r, &body); err != nil || (body.Handle == "") == (body.ContactID == "") {
		return errReply(&Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "one of handle or contact_id is required"})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	other := b.participants[body.ContactID]
	if body.Handle != "" {
		other = b.byHandle[strings.TrimPrefix(body.Handle, "@")]
	}
	if other == nil || !b.contacts[c.who.id][other.id] {
		return errReply(notFound("contact"))
	}
	b.removeContactLocked(c.who, other)
	if other.isAgent() && b.contacts[other.id][c.who.id] {
		b.removeContactLocked(other, c.who)
	}
	return okReply(http.StatusOK, map[string]string{"status": "removed"})
}

// serveContacts lists the agent's contacts, page-numbered.
func (b *Band) serveContacts(c *call) reply {
	page, size, err := pageParams(c.r)
	if err != nil {
		return errReply(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []contactJSON
	for _, p := range b.people {
		if b.contacts[c.who.id][p.id] {
			all = append(all, contactJSON{ID: p.id, Handle: p.handle, Name: p.name, Type: p.kind, Tags: []string{}, InsertedAt: p.at})
		}
	}
	items := []contactJSON{}
	if pages := (len(all) + size - 1) / size; page <= pages { // compared before multiplying: page may be huge
		start := (page - 1) * size
		items = all[start:min(start+size, len(all))]
	}
	return reply{status: http.StatusOK, data: items, meta: pageMetaJSON{Page: page, PageSize: size, TotalCount: len(all), TotalPages: (len(all) + size - 1) / size}}
}

// serveContactRequests lists the pending requests the agent received and
// those it sent (filtered by sent_status, pending by default), each
// direction paged alike.
func (b *Band) serveContactRequests(c *call) reply {
	page, size, err := pageParams(c.r)
	if err != nil {
		return errReply(err)
	}
	sentStatus := c.r.URL.Query().Get("sent_status")
	if sentStatus == "" {
		sentStatus = "pending"
	}
	if !slices.Contains([]string{"pending", "approved", "rejected", "cancelled", "all"}, sentStatus) {
		return errReply(&Error{Status: http.StatusUnprocessableEntity, Code: "validation_error", Message: "sent_status is invalid",
			Details: map[string][]string{"/sent_status": {"is invalid"}}})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var received []receivedRequestJSON
	var sent []sentRequestJSON
	for _, r := range b.contactRequests {
		if r.to == c.who && r.status == "pending" {
			received = append(received, receivedRequestJSON{ID: r.id, FromHandle: r.from.handle, FromName: r.from.name, Message: r.message, Status: r.status, InsertedAt: r.at})
		}
		if r.from == c.who && (sentStatus == "all" || r.status == sentStatus) {
			sent = append(sent, sentRequestJSON{ID: r.id, ToHandle: r.to.handle, ToName: r.to.name, Message: r.message, Status: r.status, InsertedAt: r.at})
		}
	}
	type dirMeta struct {
		Total      int `json:"total"`
		TotalPages int `json:"total_pages"`
	}
	data := map[string]any{"received": pageOf(received, page, size), "sent": pageOf(sent, page, size)}
	meta := map[string]any{"page": page, "page_size": size,
		"received": dirMeta{len(received), (len(received) + size - 1) / size}, "sent": dirMeta{len(sent), (len(sent) + size - 1) / size}}
	return reply{status: http.StatusOK, data: data, meta: meta}
}

// pageOf is page (from 1) of all, size a page; page is compared before
// it is multiplied, as it may be huge.
func pageOf[T any](all []T, page, size int) []T {
	if page > (len(all)+size-1)/size {
		return []T{}
	}
	start := (page - 1) * size
	return all[start:min(start+size, len(all))]
}

func pageParams(r *http.Request) (page, size int, err *Error) {
	q := r.URL.Query()
	if page, err = intParam(q, "page", 1, 0); err != nil {
		return 0, 0, err
	}
	size, err = intParam(q, "page_size", chatsPageSizeDefault, maxPageSize)
	return page, size, err
}
