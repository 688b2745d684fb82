package band

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// Endpoint names of the board's calls, as errors and logs show them.
const (
	EndpointTasks       = "GET /agent/chats/{id}/tasks"
	EndpointCreateTask  = "POST /agent/chats/{id}/tasks"
	EndpointTask        = "GET /agent/chats/{id}/tasks/{task_id}"
	EndpointUpdateTask  = "POST /agent/chats/{id}/tasks/{task_id}"
	EndpointTaskHistory = "GET /agent/chats/{id}/tasks/{task_id}/history"
	EndpointBoard       = "GET /agent/chats/{id}/board"
	EndpointPutBoard    = "PUT /agent/chats/{id}/board"
)

// Task is a shared task on a room's board (the document's Task). Tasks are
// never deleted: they are cancelled, superseded or archived.
type Task struct {
	ID         string `json:"id"`
	ChatRoomID string `json:"chat_room_id"`
	// Number is the task's board handle, "#3" for 3.
	Number  int    `json:"number"`
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
	// State is "active", "cancelled", "superseded" or "archived";
	// OverallStatus the roll-up of the assignments' statuses.
	State          string           `json:"state"`
	OverallStatus  string           `json:"overall_status"`
	SupersededByID string           `json:"superseded_by_id,omitempty"`
	CreatedBy      TaskActor        `json:"created_by"`
	Assignments    []TaskAssignment `json:"assignments"`
	InsertedAt     time.Time        `json:"inserted_at,omitzero"`
	UpdatedAt      time.Time        `json:"updated_at,omitzero"`
}

// TaskActor is who created, changed or works a task.
type TaskActor struct {
	ID string `json:"id"`
	// Type is "User" or "Agent"; Handle "" when the actor has none.
	Type   string `json:"type"`
	Name   string `json:"name"`
	Handle string `json:"handle,omitempty"`
}

// TaskAssignment is one participant's stake in a task: its own status,
// its "doing X" sentence, and its link to its own tooling.
type TaskAssignment struct {
	Assignee       TaskActor `json:"assignee"`
	Status         string    `json:"status"`
	ActiveForm     string    `json:"active_form"`
	LinkedNativeID string    `json:"linked_native_id"`
	UpdatedAt      time.Time `json:"updated_at,omitzero"`
}

// TaskEvent is one row of a task's append-only history.
type TaskEvent struct {
	// Event is created, edited, status_changed, commented, dropped,
	// cancelled, superseded, archived or unarchived.
	Event string    `json:"event"`
	Actor TaskActor `json:"actor"`
	At    time.Time `json:"at,omitzero"`
	// Payload is the change: {"text"} for a comment, {field: {from, to}}
	// for an edit, ...
	Payload map[string]any `json:"payload"`
}

// NewTask is what POST .../tasks creates. Subject is required;
// SupersedesID (a UUID or a board number) names the active task it
// replaces.
type NewTask struct {
	Subject      string `json:"subject"`
	Detail       string `json:"detail,omitempty"`
	SupersedesID string `json:"supersedes_id,omitempty"`
}

// TaskUpdate is one update of a task; every field "" is left alone, and
// at least one must be set. Status reports the agent's own progress
// (pending, in_progress, blocked, in_review, failed, completed) and joins
// it to the task; ActiveForm is its "doing X" sentence; Comment appends a
// note to the history; State cancels, archives or restores ("active").
type TaskUpdate struct {
	Status         string `json:"status,omitempty"`
	ActiveForm     string `json:"active_form,omitempty"`
	Comment        string `json:"comment,omitempty"`
	Subject        string `json:"subject,omitempty"`
	Detail         string `json:"detail,omitempty"`
	LinkedNativeID string `json:"linked_native_id,omitempty"`
	State          string `json:"state,omitempty"`
}

// Board is a room's goal, the team's mission. GoalTitle is "" while no
// goal is set.
type Board struct {
	ChatRoomID  string    `json:"chat_room_id"`
	GoalTitle   string    `json:"goal_title"`
	GoalSummary string    `json:"goal_summary"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
}

// Goal is a change of a room's goal: the fields not nil are set.
type Goal struct {
	Title   *string `json:"goal_title,omitempty"`
	Summary *string `json:"goal_summary,omitempty"`
}

// MaxTaskPages bounds the pages Tasks and TaskHistory read.
const MaxTaskPages = 1000

const tasksPageSize = 100

func taskPath(chatID, taskID string) string {
	return "/agent/chats/" + url.PathEscape(chatID) + "/tasks/" + url.PathEscape(taskID)
}

// CreateTask creates a task on the room's board. It is sent once, never
// retried below the caller: a repeat would be a second task
// (bandonce.Message.CreateTask guards it).
func (c *Client) CreateTask(ctx context.Context, chatID string, t NewTask) (Task, error) {
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointCreateTask, Method: http.MethodPost,
		Path: "/agent/chats/" + url.PathEscape(chatID) + "/tasks", IDs: []string{chatID}, Body: t})
	if err != nil {
		return Task{}, err
	}
	return decodeTask(ans)
}

// UpdateTask changes a task (by UUID or board number). An update without
// a comment sets state, so it is retried like a read; one with a comment
// is sent once, because a repeat would post the comment twice
// (bandonce.Message.UpdateTask guards it).
func (c *Client) UpdateTask(ctx context.Context, chatID, taskID string, u TaskUpdate) (Task, error) {
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointUpdateTask, Method: http.MethodPost,
		Path: taskPath(chatID, taskID), IDs: []string{chatID, taskID}, Body: u, Retry: u.Comment == ""})
	if err != nil {
		return Task{}, err
	}
	return decodeTask(ans)
}

// Task reads one task by UUID or board number, whatever its state.
func (c *Client) Task(ctx context.Context, chatID, taskID string) (Task, error) {
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointTask, Method: http.MethodGet,
		Path: taskPath(chatID, taskID), IDs: []string{chatID, taskID}, Retry: true})
	if err != nil {
		return Task{}, err
	}
	return decodeTask(ans)
}

// Tasks lists the room's tasks in board order, every page: state "" is
// Band's default (the active ones); "all" lists every state.
func (c *Client) Tasks(ctx context.Context, chatID, state string) ([]Task, error) {
	var all []Task
	err := c.pages(ctx, EndpointTasks, "/agent/chats/"+url.PathEscape(chatID)+"/tasks", "/agent/chats/{id}/tasks", chatID, url.Values{"state": nonEmpty(state)},
		func(ans *wire.Answer) error {
			var items []Task
			if err := ans.Data(&items); err != nil {
				return err
			}
			for _, t := range items {
				if t.ID == "" {
					return ans.Protocol("task has no id")
				}
			}
			all = append(all, items...)
			return nil
		})
	return all, err
}

// TaskHistory reads a task's whole history, oldest first.
func (c *Client) TaskHistory(ctx context.Context, chatID, taskID string) ([]TaskEvent, error) {
	var all []TaskEvent
	err := c.pages(ctx, EndpointTaskHistory, taskPath(chatID, taskID)+"/history", "/agent/chats/{id}/tasks/{task_id}/history", chatID, nil, func(ans *wire.Answer) error {
		var items []TaskEvent
		if err := ans.Data(&items); err != nil {
			return err
		}
		all = append(all, items...)
		return nil
	}, taskID)
	return all, err
}

// pages walks a cursor-paged listing ({"data": [...], "metadata":
// {"has_more", "next_cursor"}}) at path (template is the path without
// ids, for errors), handing each answer to page. A cursor the server
// repeats, or more than MaxTaskPages pages, ends the walk with a
// *PagingError, logged once. A page over the client's cap on answers is
// asked again with half as many items, down to one.
func (c *Client) pages(ctx context.Context, endpoint, path, template, chatID string, q url.Values, page func(*wire.Answer) error, ids ...string) (err error) {
	defer func() { c.warnPaging(err) }()
	p := c.api.NewPager(endpoint, template, "", MaxTaskPages)
	cursor, limit := "", tasksPageSize
	for {
		query := url.Values{"limit": {strconv.Itoa(limit)}}
		for k, v := range q {
			if len(v) > 0 {
				query[k] = v
			}
		}
		if cursor != "" {
			query.Set("cursor", cursor)
		}
		ans, err := c.api.Do(ctx, wire.Call{Endpoint: endpoint, Method: http.MethodGet, Path: path, Query: query,
			IDs: append([]string{chatID}, ids...), Retry: true})
		if smaller, ok := halved(limit, err); ok {
			limit = smaller
			continue
		}
		if err != nil {
			return err
		}
		if err := page(ans); err != nil {
			return err
		}
		var meta cursorMeta
		if err := ans.Metadata(&meta); err != nil {
			return err
		}
		next, err := meta.next(ans)
		if err != nil || next == "" {
			return err
		}
		if err := p.Advance(next); err != nil {
			return err
		}
		cursor = next
	}
}

// halved is the page size to ask for again after err: half of limit, when
// the answer was over the cap and a smaller page may fit.
func halved(limit int, err error) (int, bool) {
	if limit <= 1 || !errors.Is(err, ErrTooLarge) {
		return limit, false
	}
	return limit / 2, true
}

// Board reads the room's goal.
func (c *Client) Board(ctx context.Context, chatID string) (Board, error) {
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointBoard, Method: http.MethodGet,
		Path: "/agent/chats/" + url.PathEscape(chatID) + "/board", IDs: []string{chatID}, Retry: true})
	if err != nil {
		return Board{}, err
	}
	return decodeBoard(ans)
}

// SetGoal sets the room's goal (an upsert of the fields given). Setting a
// goal is a change of state: a repeat leaves the board as one does, so it
// is retried like a read.
func (c *Client) SetGoal(ctx context.Context, chatID string, g Goal) (Board, error) {
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointPutBoard, Method: http.MethodPut,
		Path: "/agent/chats/" + url.PathEscape(chatID) + "/board", IDs: []string{chatID}, Body: g, Retry: true})
	if err != nil {
		return Board{}, err
	}
	return decodeBoard(ans)
}

func decodeTask(ans *wire.Answer) (Task, error) {
	var t Task
	if err := ans.Data(&t); err != nil {
		return Task{}, err
	}
	if t.ID == "" {
		return Task{}, ans.Protocol("task has no id")
	}
	return t, nil
}

func decodeBoard(ans *wire.Answer) (Board, error) {
	var b Board
	err := ans.Data(&b)
	return b, err
}

func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}
