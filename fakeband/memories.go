package fakeband

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Memory limits and vocabularies, from the document's AgentMemory and
// AgentMemoryCreateRequest.
const (
	memoryContentMax  = 16384 // characters; the document sets none, the fake bounds it
	memoryPageDefault = 50
	memoryPageMax     = 50
)

var (
	memorySystems = map[string][]string{ // system -> its types
		"sensory":   {"iconic", "echoic", "haptic"},
		"working":   {"episodic", "semantic", "procedural"},
		"long_term": {"episodic", "semantic", "procedural"},
	}
	memorySegments = []string{"user", "agent", "tool", "guideline"}
	memoryScopes   = []string{"subject", "organization"}
	memoryStatuses = []string{"active", "superseded", "archived"}
)

// Memory is one stored memory as the truth reports it. Metadata is its
// metadata object as stored (compacted), nil when it had none.
type Memory struct {
	Seq                                     int
	ID, SourceAgentID, Content, Status      string
	Scope, Segment, System, Type, SubjectID string
	Thought                                 string
	Metadata                                json.RawMessage
}

// memory is a stored memory; the fake has one organization.
type memory struct {
	Memory
	at time.Time
}

type memoryJSON struct {
	ID             string          `json:"id"`
	Content        string          `json:"content"`
	Metadata       json.RawMessage `json:"metadata"`
	OrganizationID string          `json:"organization_id"`
	Scope          string          `json:"scope"`
	Segment        string          `json:"segment"`
	SourceAgentID  string          `json:"source_agent_id"`
	Status         string          `json:"status"`
	SubjectID      *string         `json:"subject_id"`
	System         string          `json:"system"`
	Thought        *string         `json:"thought"`
	Type           string          `json:"type"`
	InsertedAt     time.Time       `json:"inserted_at"`
}

func (b *Band) renderMemory(m *memory) memoryJSON {
	j := memoryJSON{ID: m.ID, Content: m.Content, Metadata: m.Metadata, OrganizationID: b.owner.id, Scope: m.Scope,
		Segment: m.Segment, SourceAgentID: m.SourceAgentID, Status: m.Status, System: m.System, Type: m.Type, InsertedAt: m.at}
	if m.SubjectID != "" {
		s := m.SubjectID
		j.SubjectID = &s
	}
	if m.Thought != "" {
		t := m.Thought
		j.Thought = &t
	}
	if j.Metadata == nil {
		j.Metadata = json.RawMessage("{}")
	}
	return j
}

// serveCreateMemory stores a memory with the agent as its source. Every
// POST stores a new one: Band has no idempotency key for memories.
func (b *Band) serveCreateMemory(c *call) reply {
	var body struct {
		Memory *struct {
			Content   *string         `json:"content"`
			System    string          `json:"system"`
			Type      string          `json:"type"`
			Segment   string          `json:"segment"`
			Thought   *string         `json:"thought"`
			Scope     string          `json:"scope"`
			SubjectID string          `json:"subject_id"`
			Metadata  json.RawMessage `json:"metadata"`
		} `json:"memory"`
	}
	if err := decodeBody(c.r, &body); err != nil || body.Memory == nil {
		return errReply(unprocessable("validation_error", `body must be {"memory": {...}}`, "/memory", "is invalid"))
	}
	in := body.Memory
	scope := in.Scope
	if scope == "" {
		scope = "subject"
	}
	switch {
	case in.Content == nil || isBlank(*in.Content):
		return errReply(unprocessable("validation_error", "content can't be blank", "/memory/content", "can't be blank"))
	case len([]rune(*in.Content)) > memoryContentMax:
		return errReply(unprocessable("validation_error", "content is too long", "/memory/content", "is too long"))
	case in.Thought == nil || isBlank(*in.Thought):
		return errReply(unprocessable("validation_error", "thought can't be blank", "/memory/thought", "can't be blank"))
	case memorySystems[in.System] == nil:
		return errReply(unprocessable("validation_error", "system is invalid", "/memory/system", "is invalid"))
	case !slices.Contains(memorySystems[in.System], in.Type):
		return errReply(unprocessable("validation_error", "type is not valid for the system", "/memory/type", "is invalid"))
	case !slices.Contains(memorySegments, in.Segment):
		return errReply(unprocessable("validation_error", "segment is invalid", "/memory/segment", "is invalid"))
	case !slices.Contains(memoryScopes, scope):
		return errReply(unprocessable("validation_error", "scope is invalid", "/memory/scope", "is invalid"))
	case scope == "subject" && !isUUID(in.SubjectID):
		return errReply(unprocessable("validation_error", "subject scope needs a subject_id", "/memory/subject_id", "is invalid"))
	case scope == "organization" && in.SubjectID != "":
		return errReply(unprocessable("validation_error", "an organization memory has no subject", "/memory/subject_id", "must be blank"))
	}
	meta, ok := compactObject(in.Metadata)
	if !ok {
		return errReply(unprocessable("validation_error", "metadata must be an object", "/memory/metadata", "is invalid"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if in.SubjectID != "" && b.participants[in.SubjectID] == nil {
		return errReply(unprocessable("validation_error", "subject does not exist", "/memory/subject_id", "does not exist"))
	}
	m := &memory{Memory: Memory{ID: b.ids.uuid(), SourceAgentID: c.who.id, Content: *in.Content, Status: "active",
		Scope: scope, Segment: in.Segment, System: in.System, Type: in.Type, SubjectID: in.SubjectID, Thought: *in.Thought,
		Metadata: meta}, at: b.stamp()}
	m.Seq = b.truth.record(Event{Kind: EventMemory, AgentID: c.who.id, Detail: m.ID})
	b.memories = append(b.memories, m)
	return okReply(http.StatusCreated, b.renderMemory(m))
}

// compactObject checks raw is a JSON object (or absent or null, nil) and
// compacts it.
func compactObject(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, false
	}
	out, _ := json.Marshal(obj)
	return out, true
}

// serveMemories lists the memories, oldest first, cursor-paged (or, the
// deprecated way, page-numbered, with Deprecation and Sunset headers).
// The fake shows an agent every memory of its one organization.
func (b *Band) serveMemories(c *call) reply {
	q := c.r.URL.Query()
	status := q.Get("status")
	if status == "" {
		status = "active"
	}
	if status != "all" && !slices.Contains(memoryStatuses, status) {
		return errReply(unprocessable("validation_error", "status is invalid", "/status", "is invalid"))
	}
	if s := q.Get("scope"); s != "" && s != "all" && !slices.Contains(memoryScopes, s) {
		return errReply(unprocessable("validation_error", "scope is invalid", "/scope", "is invalid"))
	}
	if s := q.Get("subject_id"); s != "" && !isUUID(s) {
		return errReply(unprocessable("validation_error", "subject_id must be a UUID", "/subject_id", "is invalid"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []*memory
	for _, m := range b.memories {
		if memoryMatches(m, q, status) {
			all = append(all, m)
		}
	}
	render := make([]memoryJSON, 0, len(all))
	if q.Get("cursor") == "" && (q.Has("page") || q.Has("page_size")) {
		page, err := intParam(q, "page", 1, 0)
		if err != nil {
			return errReply(err)
		}
		size, err := intParam(q, "page_size", memoryPageDefault, memoryPageMax)
		if err != nil {
			return errReply(err)
		}
		meta := pageMetaJSON{Page: page, PageSize: size, TotalCount: len(all), TotalPages: (len(all) + size - 1) / size}
		if page <= meta.TotalPages {
			start := (page - 1) * size
			for _, m := range all[start:min(start+size, len(all))] {
				render = append(render, b.renderMemory(m))
			}
		}
		return reply{status: http.StatusOK, data: render, meta: meta, legacyMeta: true, deprecated: true}
	}
	limit, err := intParam(q, "limit", memoryPageDefault, memoryPageMax)
	if err != nil {
		return errReply(err)
	}
	start, bad := cursorStart(q, len(all))
	if bad != nil {
		return errReply(bad)
	}
	for _, m := range all[start:min(start+limit, len(all))] {
		render = append(render, b.renderMemory(m))
	}
	return reply{status: http.StatusOK, data: render, meta: cursorPage(start, limit, len(all)), legacyMeta: true}
}

func memoryMatches(m *memory, q url.Values, status string) bool {
	if status != "all" && m.Status != status {
		return false
	}
	for name, v := range map[string]string{"subject_id": m.SubjectID, "system": m.System, "type": m.Type, "segment": m.Segment} {
		if want := q.Get(name); want != "" && want != v {
			return false
		}
	}
	if s := q.Get("scope"); s != "" && s != "all" && s != m.Scope {
		return false
	}
	cq := strings.ToLower(q.Get("content_query"))
	return cq == "" || strings.Contains(strings.ToLower(m.Content), cq)
}

func (b *Band) memoryLocked(id string) *memory {
	for _, m := range b.memories {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (b *Band) serveMemory(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.memoryLocked(c.r.PathValue("id"))
	if m == nil {
		return errReply(notFound("memory"))
	}
	return okReply(http.StatusOK, b.renderMemory(m))
}

// serveMemoryStatus supersedes or archives a memory; only its source
// agent may. Doing it again leaves it as it is.
func (b *Band) serveMemoryStatus(status string) func(c *call) reply {
	return func(c *call) reply {
		b.mu.Lock()
		defer b.mu.Unlock()
		m := b.memoryLocked(c.r.PathValue("id"))
		switch {
		case m == nil:
			return errReply(notFound("memory"))
		case m.SourceAgentID != c.who.id:
			return errReply(forbidden("only the source agent may change a memory's status"))
		}
		if m.Status != status {
			m.Status = status
			b.truth.record(Event{Kind: EventMemoryStatus, AgentID: c.who.id, Detail: m.ID + " " + status})
		}
		return okReply(http.StatusOK, b.renderMemory(m))
	}
}

// Memories returns every memory stored, in the order they were stored.
func (b *Band) Memories() []Memory {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Memory, len(b.memories))
	for i, m := range b.memories {
		out[i] = m.Memory
		out[i].Metadata = slices.Clone(m.Metadata)
	}
	return out
}
