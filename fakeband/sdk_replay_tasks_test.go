package fakeband_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// taskFields are what the document requires of a Task, the model the
// Python SDK's task tools hand the model.
var taskFields = []string{"id:string", "number:number", "subject:string", "state:string", "overall_status:string",
	"assignments:list", "chat_room_id:string", "inserted_at:string", "updated_at:string"}

// The Python SDK's task-board tools, with the arguments their input
// models take (src/band/runtime/tools/inputs/tasks.py as the search index
// holds it, commit 05dc148, gated behind Capability.TASKS: band_list_tasks
// {state, cursor, limit}, band_create_task {subject, detail,
// supersedes_id}, band_get_task {id: UUID or board number, include},
// band_update_task {id, status, active_form, comment, subject, detail,
// state}, band_get_task_history {id, cursor, limit}, band_get_board
// {include}, band_set_board {goal_title, goal_summary}), are served
// without error, each answer holding the document's Task, TaskEvent or
// board.
func TestPythonSDKTaskToolsAreServed(t *testing.T) {
	f := newFixture(t)
	s := &sdkRun{fixture: f, t: t}

	assert.Empty(t, s.call("GET", f.chat("/tasks"), nil, 200).list(t), "band_list_tasks: an empty board")
	created := s.call("POST", f.chat("/tasks"), map[string]any{"subject": "Refund order-17", "detail": "Asked in this room."}, 201).data(t)
	has(t, created, taskFields...)
	id := created["id"].(string)
	replacing := s.call("POST", f.chat("/tasks"), map[string]any{"subject": "Refund order-17 in full", "supersedes_id": "1"}, 201).data(t)
	has(t, replacing, taskFields...)

	// band_get_task by UUID and by board number, with its history.
	has(t, s.call("GET", f.chat("/tasks/"+id), nil, 200).data(t), taskFields...)
	byNumber := s.call("GET", f.chat("/tasks/2?include=history"), nil, 200).data(t)
	has(t, byNumber, taskFields...)
	assert.Equal(t, replacing["id"], byNumber["id"])

	// band_update_task: join with a status and a "doing X" sentence, then
	// comment, edit, and tidy away; each answers the Task.
	next := "2"
	for _, body := range []map[string]any{
		{"status": "in_progress", "active_form": "refunding order-17"},
		{"comment": "Refunded; receipt re_1."},
		{"subject": "Refund order-17 (done)", "detail": "Refunded in full."},
		{"status": "completed"},
		{"state": "archived"},
	} {
		has(t, s.call("POST", f.chat("/tasks/"+next), body, 200).data(t), taskFields...)
	}

	// band_list_tasks with a state filter and a page, band_get_task_history
	// paged: each answer's metadata has the cursor fields.
	for path, n := range map[string]int{f.chat("/tasks?state=all&limit=1"): 1, f.chat("/tasks/" + next + "/history?limit=2"): 2} {
		page := s.call("GET", path, nil, 200)
		require.Len(t, page.list(t), n)
		has(t, page.body(t)["metadata"].(map[string]any), "has_more:bool", "limit:number")
		if cursor, _ := page.body(t)["metadata"].(map[string]any)["next_cursor"].(string); cursor != "" {
			s.call("GET", path+"&cursor="+cursor, nil, 200)
		}
	}
	history := s.call("GET", f.chat("/tasks/"+next+"/history"), nil, 200).list(t)
	for _, e := range history {
		has(t, e.(map[string]any), "actor:object", "at:string", "event:string", "payload:object")
	}

	// band_get_board before a goal (goal_title null), band_set_board, then
	// band_get_board with the goal's audit trail.
	empty := s.call("GET", f.chat("/board"), nil, 200).data(t)
	assert.Nil(t, empty["goal_title"], "no goal yet")
	set := s.call("PUT", f.chat("/board"), map[string]any{"goal_title": "Refunds", "goal_summary": "Refund what is asked, once."}, 200).data(t)
	assert.Equal(t, "Refunds", set["goal_title"])
	s.call("PUT", f.chat("/board"), map[string]any{"goal_summary": "Refund what is asked, once each."}, 200)
	board := s.call("GET", f.chat("/board?include=history"), nil, 200).data(t)
	assert.Equal(t, "Refunds", board["goal_title"], "only the fields sent are changed")
	assert.Equal(t, "Refund what is asked, once each.", board["goal_summary"])

	tasks := f.b.Tasks(f.room.ID)
	require.Len(t, tasks, 2, "the truth holds each task once")
	assert.Equal(t, "superseded", tasks[0].State)
	require.Len(t, tasks[1].Comments, 1)
	bd, ok := f.b.RoomBoard(f.room.ID)
	require.True(t, ok)
	assert.Equal(t, 2, bd.Changes)
}
