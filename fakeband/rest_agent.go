package fakeband

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"

	"github.com/band-once/bandonce/internal/jsonreuse"
)

// MaxBody bounds a request body: a larger one is answered 413
// payload_too_large (ErrTooLarge). Band does not publish its own limit.
const MaxBody = 1 << 20

const maxBody = MaxBody

func (b *Band) agentRoutes() []route {
	const chat = "/api/v1/agent/chats/{chat_id}"
	const msg = chat + "/messages/{message_id}"
	return []route{
		{"GET /api/v1/agent/me", EndpointMe, agentSide, b.serveMe},
		{"GET /api/v1/agent/chats", EndpointChats, agentSide, b.serveChats},
		{"GET " + chat + "/messages/next", EndpointNext, agentSide, b.serveNext},
		{"POST " + msg + "/processing", EndpointProcessing, agentSide, b.serveProcessing},
		{"POST " + msg + "/processed", EndpointProcessed, agentSide, b.serveProcessed},
		{"POST " + msg + "/failed", EndpointFailed, agentSide, b.serveFailed},
		{"POST " + chat + "/messages", EndpointPost, agentSide, b.servePost},
		{"GET " + chat + "/context", EndpointContext, agentSide, b.serveContext},
		{"GET " + chat + "/messages", EndpointMessages, agentSide, b.serveMessages},
		{"POST " + chat + "/events", EndpointEvent, agentSide, b.serveEvent},
		{"POST " + chat + "/activity", EndpointActivity, agentSide, b.serveActivity},
		{"GET " + chat + "/participants", EndpointParticipants, agentSide, b.serveParticipants},
		{"POST " + chat + "/participants", EndpointAddParticipant, agentSide, b.serveAddParticipant},
		{"DELETE " + chat + "/participants/{id}", EndpointRemoveParticipant, agentSide, b.serveRemoveParticipant},
		{"POST /api/v1/agent/chats", EndpointCreateChat, agentSide, b.serveCreateChat},
		{"GET /api/v1/agent/peers", EndpointPeers, agentSide, b.servePeers},
		{"POST /api/v1/agent/memories", EndpointCreateMemory, agentSide, b.serveCreateMemory},
		{"GET /api/v1/agent/memories", EndpointMemories, agentSide, b.serveMemories},
		{"GET /api/v1/agent/memories/{id}", EndpointMemory, agentSide, b.serveMemory},
		{"POST /api/v1/agent/memories/{id}/supersede", EndpointMemoryStatus, agentSide, b.serveMemoryStatus("superseded")},
		{"POST /api/v1/agent/memories/{id}/archive", EndpointMemoryStatus, agentSide, b.serveMemoryStatus("archived")},
		{"POST " + chat + "/tasks", EndpointCreateTask, agentSide, b.serveCreateTask},
		{"GET " + chat + "/tasks", EndpointTasks, agentSide, b.serveTasks},
		{"GET " + chat + "/tasks/{id}", EndpointTask, agentSide, b.serveTask},
		{"POST " + chat + "/tasks/{id}", EndpointUpdateTask, agentSide, b.serveUpdateTask},
		{"GET " + chat + "/tasks/{id}/history", EndpointTaskHistory, agentSide, b.serveTaskHistory},
		{"GET " + chat + "/board", EndpointBoard, agentSide, b.serveBoard},
		{"PUT " + chat + "/board", EndpointPutBoard, agentSide, b.servePutBoard},
		{"GET /api/v1/agent/chats/{id}", EndpointChat, agentSide, b.serveChat},
		{"PATCH /api/v1/agent/chats/{id}", EndpointRenameChat, agentSide, b.serveRenameChat},
		{"GET /api/v1/agent/contacts", EndpointContacts, agentSide, b.serveContacts},
		{"POST /api/v1/agent/contacts/add", EndpointAddContact, agentSide, b.serveAddContact},
		{"POST /api/v1/agent/contacts/remove", EndpointRemoveContact, agentSide, b.serveRemoveContact},
		{"GET /api/v1/agent/contacts/requests", EndpointContactRequests, agentSide, b.serveContactRequests},
		{"POST /api/v1/agent/contacts/requests/respond", EndpointRespondContact, agentSide, b.serveRespondContact},
	}
}

func (b *Band) serveMe(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := c.who
	return okReply(http.StatusOK, agentMeJSON{
		ID: p.id, Name: p.name, Handle: p.handle, Description: p.description, OwnerUUID: b.owner.id,
		Tags: []string{}, InsertedAt: p.at, UpdatedAt: p.at, FeatureFlags: map[string]any{},
	})
}

func (b *Band) serveChats(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	items, meta, err := b.chatsLocked(c.who, c.r.URL.Query())
	if err != nil {
		return errReply(err)
	}
	return reply{status: http.StatusOK, data: items, meta: meta}
}

func (b *Band) serveNext(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	stale := c.fault != nil && c.fault.Kind == StaleNext
	m, servedStale, err := b.nextLocked(c.who, c.r.PathValue("chat_id"), stale)
	switch {
	case err != nil:
		return errReply(err)
	case m == nil:
		return okReply(http.StatusNoContent, nil)
	}
	if servedStale {
		b.faults.fired[string(EndpointNext)+"/"+StaleNext.String()]++
	}
	return okReply(http.StatusOK, renderMessage(m))
}

func (b *Band) serveProcessing(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	mark, err := b.markProcessingLocked(c.who, c.r.PathValue("chat_id"), c.r.PathValue("message_id"))
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, mark)
}

func (b *Band) serveProcessed(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	mark, err := b.markDoneLocked(c.who, c.r.PathValue("chat_id"), c.r.PathValue("message_id"), StatusProcessed, "")
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, mark)
}

func (b *Band) serveFailed(c *call) reply {
	var body struct {
		Error *string `json:"error"`
	}
	bodyErr := decodeBody(c.r, &body)
	b.mu.Lock()
	defer b.mu.Unlock()
	roomID, msgID := c.r.PathValue("chat_id"), c.r.PathValue("message_id")
	// A message the agent cannot see is 404 whatever the body says.
	if _, err := b.deliveryLocked(c.who, roomID, msgID); err != nil {
		return errReply(err)
	}
	if bodyErr != nil || body.Error == nil || isBlank(*body.Error) {
		return errReply(unprocessable("validation_error", "error must be a non-blank string", "/error", "can't be blank"))
	}
	mark, err := b.markDoneLocked(c.who, roomID, msgID, StatusFailed, *body.Error)
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, mark)
}

func (b *Band) servePost(c *call) reply { return b.postOverHTTP(c) }

// postOverHTTP serves both the agent's and the human's post; the sender
// is whoever holds the key.
func (b *Band) postOverHTTP(c *call) reply {
	var body struct {
		Message *struct {
			Content  *string     `json:"content"`
			Mentions []mentionIn `json:"mentions"`
		} `json:"message"`
	}
	bodyErr := decodeBody(c.r, &body)
	b.mu.Lock()
	defer b.mu.Unlock()
	roomID := c.r.PathValue("chat_id")
	// The room and the stop gate come before the body, as on Band.
	if _, err := b.postableRoom(roomID, c.who); err != nil {
		return errReply(err)
	}
	if bodyErr != nil || body.Message == nil {
		return errReply(unprocessable("validation_error", `body must be {"message": {"content", "mentions"}}`, "/message", "is invalid"))
	}
	m, err := b.postLocked(roomID, c.who, body.Message.Content, body.Message.Mentions)
	if err != nil {
		return errReply(err)
	}
	out := postedJSON{ID: m.id, Success: true, Recipients: []recipientJSON{}}
	for _, id := range m.recipients {
		p := b.participants[id]
		out.Recipients = append(out.Recipients, recipientJSON{ID: p.id, Handle: p.handle, Name: p.name})
	}
	return okReply(http.StatusCreated, out)
}

func (b *Band) serveContext(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := c.r.URL.Query()
	items, meta, deprecated, err := b.contextLocked(c.who, c.r.PathValue("chat_id"), q)
	if err != nil {
		return errReply(err)
	}
	if c.fault != nil && c.fault.Kind == LoopCursor {
		self := q.Get("cursor")
		if self == "" {
			self = encodeCursor(0)
		}
		meta.HasMore, meta.NextCursor = true, &self
	}
	// Band still sends the deprecated "meta" copy beside "metadata", and
	// older SDK clients read it.
	return reply{status: http.StatusOK, data: items, meta: meta, legacyMeta: true, deprecated: deprecated}
}

// decodeBody reads a JSON object body of at most maxBody bytes.
func decodeBody(r *http.Request, v any) error {
	var data []byte
	if b, ok := r.Body.(*readBody); ok && b.Len() == len(b.data) {
		data = b.data // not read yet: boundBody has it whole
	} else {
		var err error
		if data, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1)); err != nil {
			return err
		}
	}
	if len(data) > maxBody {
		return io.ErrShortBuffer
	}
	if jsonreuse.Unmarshal(data, v) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero() // zero again, as the callers hand it in
	return json.Unmarshal(data, v)      // again, for its error
}
