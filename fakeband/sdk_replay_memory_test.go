package fakeband_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memoryFields are what the document requires of an AgentMemory, the
// model the Python SDK's memory tools return to the model.
var memoryFields = []string{"id:string", "content:string", "inserted_at:string", "scope:string", "segment:string",
	"system:string", "type:string"}

// The Python SDK's memory tools and its task event, call by call as
// src/band/runtime/tools.py (1ca53ba) makes them, are served without
// error, with what the SDK reads from each answer. The SDK hands the model
// no tool for a room's board at that commit: its only task is the "task"
// event of send_event, replayed last.
func TestPythonSDKMemoryToolsAndTaskEventAreServed(t *testing.T) {
	f := newFixture(t)
	s := &sdkRun{fixture: f, t: t}

	// PY:tools.py store_memory: POST /agent/memories with {"memory": {content,
	// system, type, segment, thought, scope, subject_id?, metadata?}};
	// "no response data" is an error.
	stored := s.call("POST", "/agent/memories", map[string]any{"memory": map[string]any{
		"content": "Alice wants refunds confirmed by Bea", "system": "long_term", "type": "semantic",
		"segment": "user", "thought": "she asked twice", "scope": "subject", "subject_id": f.alice.ID,
		"metadata": map[string]any{"tags": []string{"refunds"}},
	}}, 201).data(t)
	has(t, stored, memoryFields...)
	id := stored["id"].(string)
	org := s.call("POST", "/agent/memories", map[string]any{"memory": map[string]any{
		"content": "Refunds above 100 need a second approver", "system": "long_term", "type": "procedural",
		"segment": "guideline", "thought": "policy", "scope": "organization",
	}}, 201).data(t)
	has(t, org, memoryFields...)

	// PY:tools.py list_memories: page_size=50 (the deprecated paging) and
	// the filters the model gave; the answer's .data and .meta are handed
	// to the model as they are.
	listed := s.call("GET", "/agent/memories?page_size=50&subject_id="+f.alice.ID+"&scope=subject&system=long_term", nil, 200)
	items := listed.list(t)
	require.Len(t, items, 1)
	has(t, items[0].(map[string]any), memoryFields...)
	has(t, listed.body(t)["meta"].(map[string]any), "page:number", "page_size:number", "total_count:number", "total_pages:number")
	assert.Equal(t, "true", listed.header.Get("Deprecation"), "page_size paging is deprecated")
	assert.NotEmpty(t, listed.header.Get("Sunset"))
	all := s.call("GET", "/agent/memories?page_size=50&status=all&scope=all", nil, 200).list(t)
	assert.Len(t, all, 2)
	found := s.call("GET", "/agent/memories?page_size=50&content_query=second+approver", nil, 200).list(t)
	require.Len(t, found, 1, "content_query searches the content")
	assert.Equal(t, org["id"], found[0].(map[string]any)["id"])

	// PY:tools.py get_memory, supersede_memory, archive_memory: each reads
	// .data, a Memory.
	has(t, s.call("GET", "/agent/memories/"+id, nil, 200).data(t), memoryFields...)
	superseded := s.call("POST", "/agent/memories/"+id+"/supersede", nil, 200).data(t)
	has(t, superseded, memoryFields...)
	assert.Equal(t, "superseded", superseded["status"])
	archived := s.call("POST", "/agent/memories/"+org["id"].(string)+"/archive", nil, 200).data(t)
	assert.Equal(t, "archived", archived["status"])
	assert.Empty(t, s.call("GET", "/agent/memories?page_size=50", nil, 200).list(t), "neither is active any more")

	// PY:tools.py send_event with message_type "task": a ChatEvent.
	ev := s.call("POST", f.chat("/events"), map[string]any{"event": map[string]any{
		"content": "Refund order-17: done", "message_type": "task", "metadata": map[string]any{"task_id": "t-1", "status": "completed"},
	}}, 201).data(t)
	has(t, ev, "id:string")
	assert.Len(t, f.b.Memories(), 2, "the truth holds both memories once")
}

// The Python SDK's contact tools, call by call as src/band/runtime/tools.py
// (1ca53ba) makes them, with handles written "@name" as its tool schema
// suggests, are served with what the SDK reads from each answer.
func TestPythonSDKContactToolsAreServed(t *testing.T) {
	f := newFixture(t)
	s := &sdkRun{fixture: f, t: t}
	peer := f.b.AddAgent("Peer")

	// PY:tools.py list_contacts: page 1, page_size 50; .data and .metadata.
	listed := s.call("GET", "/agent/contacts?page=1&page_size=50", nil, 200)
	assert.Empty(t, listed.list(t))
	has(t, listed.body(t)["metadata"].(map[string]any), "page:number", "page_size:number", "total_count:number", "total_pages:number")

	// PY:tools.py add_contact: {handle, message}; .data has id and status.
	added := s.call("POST", "/agent/contacts/add", map[string]any{"handle": "@" + peer.Handle, "message": nil}, 201).data(t)
	has(t, added, "id:string", "status:string")
	assert.Equal(t, "pending", added["status"])

	// PY:tools.py list_contact_requests: page, page_size, sent_status=pending.
	reqs := s.call("GET", "/agent/contacts/requests?page=1&page_size=50&sent_status=pending", nil, 200)
	data := reqs.data(t)
	has(t, data, "received:list", "sent:list")
	require.Len(t, data["sent"].([]any), 1)
	has(t, data["sent"].([]any)[0].(map[string]any), "id:string", "status:string", "to_handle:string", "inserted_at:string")
	has(t, reqs.body(t)["metadata"].(map[string]any), "page:number", "page_size:number", "received:object", "sent:object")

	// PY:tools.py respond_contact_request, from the peer: {action, handle}.
	r := f.do(t, "POST", "/agent/contacts/requests/respond", peer.Key, map[string]any{"action": "approve", "handle": "@" + f.bot.Handle})
	require.Equal(t, 200, r.status, "%s", r.raw)
	has(t, r.data(t), "id:string", "status:string")
	contacts := s.call("GET", "/agent/contacts?page=1&page_size=50", nil, 200).list(t)
	require.Len(t, contacts, 1)
	has(t, contacts[0].(map[string]any), "id:string", "handle:string", "type:string", "inserted_at:string")

	// PY:tools.py remove_contact: {handle} or {contact_id}; .data.status.
	removed := s.call("POST", "/agent/contacts/remove", map[string]any{"contact_id": contacts[0].(map[string]any)["id"]}, 200).data(t)
	assert.Equal(t, "removed", removed["status"])
}
