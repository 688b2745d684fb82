package fakeband_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The admin truth shows the memories stored, each room's tasks with their
// comments and assignments, and its goal: what a test in another language
// counts a write by.
func TestAdminTruthShowsMemoriesTasksAndTheGoal(t *testing.T) {
	f := newAdminFixture(t)
	bot := f.bot.Key
	require.Equal(t, 201, f.do(t, http.MethodPost, "/agent/memories", bot, map[string]any{"memory": map[string]any{
		"content": "remember", "system": "long_term", "type": "semantic", "segment": "user", "thought": "t",
		"scope": "subject", "subject_id": f.alice.ID, "metadata": map[string]any{"dedup_key": "k"}}}).status)
	task := f.do(t, http.MethodPost, f.chat("/tasks"), bot, map[string]any{"subject": "do it"}).data(t)["id"].(string)
	require.Equal(t, 200, f.do(t, http.MethodPost, f.chat("/tasks/"+task), bot, map[string]any{"comment": "done", "status": "completed"}).status)
	require.Equal(t, 200, f.do(t, http.MethodPut, f.chat("/board"), bot, map[string]any{"goal_title": "ship"}).status)

	status, truth := f.admin(t, http.MethodGet, "/truth", nil)
	require.Equal(t, http.StatusOK, status)
	memories := truth["memories"].([]any)
	require.Len(t, memories, 1)
	assert.Equal(t, map[string]any{"dedup_key": "k"}, memories[0].(map[string]any)["metadata"])
	room := truth["rooms"].([]any)[0].(map[string]any)
	tasks := room["tasks"].([]any)
	require.Len(t, tasks, 1)
	tk := tasks[0].(map[string]any)
	assert.Equal(t, "do it", tk["subject"])
	assert.Equal(t, []any{map[string]any{"seq": tk["comments"].([]any)[0].(map[string]any)["seq"], "author_id": f.bot.ID, "text": "done"}}, tk["comments"])
	assert.Equal(t, "completed", tk["assignments"].([]any)[0].(map[string]any)["status"])
	assert.Equal(t, map[string]any{"goal_title": "ship", "goal_summary": "", "changes": float64(1)}, room["goal"])
}
