package band

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// Endpoint names of the memory calls, as errors and logs show them.
const (
	EndpointCreateMemory    = "POST /agent/memories"
	EndpointMemories        = "GET /agent/memories"
	EndpointMemory          = "GET /agent/memories/{id}"
	EndpointSupersedeMemory = "POST /agent/memories/{id}/supersede"
	EndpointArchiveMemory   = "POST /agent/memories/{id}/archive"
)

// Memory is a memory entry an agent stored (the document's AgentMemory).
type Memory struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	// Scope is "subject" or "organization"; Segment "user", "agent",
	// "tool" or "guideline"; System "sensory", "working" or "long_term";
	// Type one of the system's types (episodic, semantic, procedural for
	// long_term; ...); Status "active", "superseded" or "archived".
	Scope   string `json:"scope"`
	Segment string `json:"segment"`
	System  string `json:"system"`
	Type    string `json:"type"`
	Status  string `json:"status,omitempty"`
	// SubjectID is the user or agent the memory is about ("" for an
	// organization-wide memory).
	SubjectID string `json:"subject_id,omitempty"`
	// Thought is the agent's reasoning for storing it.
	Thought        string `json:"thought,omitempty"`
	SourceAgentID  string `json:"source_agent_id,omitempty"`
	OrganizationID string `json:"organization_id,omitempty"`
	// Metadata is the memory's metadata ("tags", "references", and any
	// member the agent added, such as band-once's "dedup_key").
	Metadata   map[string]any `json:"metadata,omitempty"`
	InsertedAt time.Time      `json:"inserted_at,omitzero"`
}

// NewMemory is what POST /agent/memories stores (the document's
// AgentMemoryCreateRequest). Content, System, Type, Segment and Thought
// are required; Scope "" is Band's default, "subject", which needs
// SubjectID.
type NewMemory struct {
	Content   string         `json:"content"`
	System    string         `json:"system"`
	Type      string         `json:"type"`
	Segment   string         `json:"segment"`
	Thought   string         `json:"thought"`
	Scope     string         `json:"scope,omitempty"`
	SubjectID string         `json:"subject_id,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// MemoryFilter narrows GET /agent/memories; every field "" means no
// filter. Status "" is Band's default (active); "all" lists every status.
type MemoryFilter struct {
	SubjectID, Scope, System, Type, Segment, ContentQuery, Status string
}

func (f MemoryFilter) query() url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"subject_id": f.SubjectID, "scope": f.Scope, "system": f.System,
		"type": f.Type, "segment": f.Segment, "content_query": f.ContentQuery, "status": f.Status} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return q
}

// MaxMemoryPages bounds how many pages Memories reads: a server that
// keeps announcing more is refused with a *PagingError (ErrTooManyPages).
const MaxMemoryPages = 1000

// memoriesPageSize is the cursor page asked of /agent/memories.
const memoriesPageSize = 50

// CreateMemory stores a memory. It is sent once, never retried below the
// caller: Band has no idempotency key for memories, and a repeat would be
// a second memory (bandonce.Message.StoreMemory guards it).
func (c *Client) CreateMemory(ctx context.Context, m NewMemory) (Memory, error) {
	var out Memory
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointCreateMemory, Method: http.MethodPost, Path: "/agent/memories",
		Body: map[string]any{"memory": m}})
	if err != nil {
		return out, err
	}
	return out, decodeMemory(ans, &out)
}

// Memories lists the memories the agent may see, every page of them, with
// the cursor paging the document recommends (page and page_size are
// deprecated). A cursor the server repeats, or more than MaxMemoryPages
// pages, ends the walk with a *PagingError, logged once. A page over the
// client's cap on answers is asked again with half as many memories, down
// to one.
func (c *Client) Memories(ctx context.Context, f MemoryFilter) (_ []Memory, err error) {
	defer func() { c.warnPaging(err) }()
	var all []Memory
	p := c.api.NewPager(EndpointMemories, "/agent/memories", "", MaxMemoryPages)
	cursor, limit := "", memoriesPageSize
	for {
		items, next, err := c.MemoriesPage(ctx, f, cursor, limit)
		if smaller, ok := halved(limit, err); ok {
			limit = smaller
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if err := p.Advance(next); err != nil {
			return nil, err
		}
		cursor = next
	}
}

// MemoriesPage reads one cursor page of the memories (limit 1..50; 0
// means 50). next is "" on the last page, and otherwise the cursor the
// server named, even one it named before: a caller that walks the pages
// must stop on a repeat, as Memories does.
func (c *Client) MemoriesPage(ctx context.Context, f MemoryFilter, cursor string, limit int) (items []Memory, next string, err error) {
	q := f.query()
	q.Set("limit", strconv.Itoa(cmpOr(limit, memoriesPageSize)))
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointMemories, Method: http.MethodGet, Path: "/agent/memories", Query: q, Retry: true})
	if err != nil {
		return nil, "", err
	}
	if err := ans.Data(&items); err != nil {
		return nil, "", err
	}
	for _, m := range items {
		if m.ID == "" {
			return nil, "", ans.Protocol("memory has no id")
		}
	}
	var meta cursorMeta
	// Band documents the cursor fields in "meta" and "metadata" alike.
	if err := ans.Meta("meta", &meta); err != nil {
		return nil, "", err
	}
	if err := ans.Metadata(&meta); err != nil {
		return nil, "", err
	}
	if next, err = meta.next(ans); err != nil {
		return nil, "", err
	}
	return items, next, nil
}

// Memory reads one memory by id.
func (c *Client) Memory(ctx context.Context, id string) (Memory, error) {
	var out Memory
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointMemory, Method: http.MethodGet, Path: "/agent/memories/" + url.PathEscape(id),
		IDs: []string{id}, Retry: true})
	if err != nil {
		return out, err
	}
	return out, decodeMemory(ans, &out)
}

// SupersedeMemory marks a memory the agent stored as superseded: outdated
// or wrong, kept for the audit trail. A change of state, so it is retried
// like a read: a repeat has the effect of one.
func (c *Client) SupersedeMemory(ctx context.Context, id string) (Memory, error) {
	return c.memoryStatus(ctx, EndpointSupersedeMemory, id, "supersede")
}

// ArchiveMemory archives a memory the agent stored: hidden but kept, and
// a human may restore it. A change of state, retried like a read.
func (c *Client) ArchiveMemory(ctx context.Context, id string) (Memory, error) {
	return c.memoryStatus(ctx, EndpointArchiveMemory, id, "archive")
}

func (c *Client) memoryStatus(ctx context.Context, endpoint, id, verb string) (Memory, error) {
	var out Memory
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: endpoint, Method: http.MethodPost,
		Path: "/agent/memories/" + url.PathEscape(id) + "/" + verb, IDs: []string{id}, Retry: true})
	if err != nil {
		return out, err
	}
	return out, decodeMemory(ans, &out)
}

// decodeMemory decodes an answer's memory; a null subject_id or thought
// decodes as "".
func decodeMemory(ans *wire.Answer, m *Memory) error {
	if err := ans.Data(m); err != nil {
		return err
	}
	if m.ID == "" {
		return ans.Protocol("memory has no id")
	}
	return nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
