package fakeband

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Task limits and vocabularies, from the document's Task.
const (
	taskSubjectMax   = 500   // characters; the document sets none, the fake bounds it
	taskDetailMax    = 16384 // characters
	taskCommentMax   = 16384
	taskPageDefault  = 50
	taskHistoryEmbed = 100 // the events ?include=history embeds
)

var (
	taskStatuses = []string{"pending", "in_progress", "blocked", "in_review", "failed", "completed"}
	taskStates   = []string{"cancelled", "archived", "active"} // what an update may set
)

// Task is one task on a room's board as the truth reports it, with every
// comment posted on it, in order.
type Task struct {
	Seq                            int
	ID, RoomID, CreatorID, Subject string
	Detail, State, SupersededByID  string
	Number                         int
	Comments                       []TaskComment
	Assignments                    []TaskAssignment
}

// TaskComment is one comment on a task.
type TaskComment struct {
	Seq      int    `json:"seq"`
	AuthorID string `json:"author_id"`
	Text     string `json:"text"`
}

// TaskAssignment is one participant's status on a task.
type TaskAssignment struct {
	AssigneeID     string `json:"assignee_id"`
	Status         string `json:"status"`
	ActiveForm     string `json:"active_form"`
	LinkedNativeID string `json:"linked_native_id"`
}

// Board is a room's goal as the truth reports it, with how many times a
// PUT changed it.
type Board struct {
	GoalTitle   string `json:"goal_title"`
	GoalSummary string `json:"goal_summary"`
	Changes     int    `json:"changes"`
}

type task struct {
	Task
	history []taskEventJSON
	at, upd time.Time
}

type board struct {
	Board
	set       bool
	createdBy *participant
	updatedBy *participant
	at, upd   time.Time
	history   []taskEventJSON
}

type taskActorJSON struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Handle *string `json:"handle"`
}

type taskEventJSON struct {
	Actor   taskActorJSON  `json:"actor"`
	At      time.Time      `json:"at"`
	Event   string         `json:"event"`
	Payload map[string]any `json:"payload"`
}

type taskAssignmentJSON struct {
	ActiveForm     string        `json:"active_form"`
	Assignee       taskActorJSON `json:"assignee"`
	LinkedNativeID string        `json:"linked_native_id"`
	Status         string        `json:"status"`
	UpdatedAt      time.Time     `json:"updated_at"`
}

type taskJSON struct {
	Assignments      []taskAssignmentJSON `json:"assignments"`
	ChatRoomID       string               `json:"chat_room_id"`
	CreatedBy        taskActorJSON        `json:"created_by"`
	Detail           string               `json:"detail"`
	History          []taskEventJSON      `json:"history,omitempty"`
	HistoryTruncated *bool                `json:"history_truncated,omitempty"`
	ID               string               `json:"id"`
	InsertedAt       time.Time            `json:"inserted_at"`
	Number           int                  `json:"number"`
	OverallStatus    string               `json:"overall_status"`
	State            string               `json:"state"`
	Subject          string               `json:"subject"`
	SupersededByID   *string              `json:"superseded_by_id"`
	UpdatedAt        time.Time            `json:"updated_at"`
}

type boardJSON struct {
	ChatRoomID       string          `json:"chat_room_id"`
	CreatedBy        *taskActorJSON  `json:"created_by"`
	GoalSummary      *string         `json:"goal_summary"`
	GoalTitle        *string         `json:"goal_title"`
	History          []taskEventJSON `json:"history,omitempty"`
	HistoryTruncated *bool           `json:"history_truncated,omitempty"`
	InsertedAt       *time.Time      `json:"inserted_at"`
	UpdatedAt        *time.Time      `json:"updated_at"`
	UpdatedBy        *taskActorJSON  `json:"updated_by"`
}

func actor(p *participant) taskActorJSON {
	a := taskActorJSON{ID: p.id, Name: p.name, Type: p.kind}
	if p.handle != "" {
		h := p.handle
		a.Handle = &h
	}
	return a
}

// assignmentStatus orders statuses for the roll-up: the task is as far as
// its least advanced active assignee, failed and blocked first.
var rollUp = []string{"failed", "blocked", "pending", "in_progress", "in_review", "completed"}

func (b *Band) renderTask(t *task, history bool) taskJSON {
	j := taskJSON{Assignments: []taskAssignmentJSON{}, ChatRoomID: t.RoomID, CreatedBy: actor(b.participants[t.CreatorID]),
		Detail: t.Detail, ID: t.ID, InsertedAt: t.at, Number: t.Number, OverallStatus: "pending", State: t.State,
		Subject: t.Subject, UpdatedAt: t.upd}
	if t.SupersededByID != "" {
		s := t.SupersededByID
		j.SupersededByID = &s
	}
	best := len(rollUp)
	for _, a := range t.Assignments {
		j.Assignments = append(j.Assignments, taskAssignmentJSON{ActiveForm: a.ActiveForm, Assignee: actor(b.participants[a.AssigneeID]),
			LinkedNativeID: a.LinkedNativeID, Status: a.Status, UpdatedAt: t.upd})
		best = min(best, slices.Index(rollUp, a.Status))
	}
	if best < len(rollUp) {
		j.OverallStatus = rollUp[best]
	}
	if history {
		h := t.history[max(0, len(t.history)-taskHistoryEmbed):]
		truncated := len(t.history) > taskHistoryEmbed
		j.History, j.HistoryTruncated = slices.Clone(h), &truncated
	}
	return j
}

// pathTaskLocked is the task the call's path names ({chat_id}, {id}), and
// its room, which the caller must be a member of.
func (b *Band) pathTaskLocked(c *call) (*room, *task, *Error) {
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return nil, nil, err
	}
	t := b.taskLocked(r, c.r.PathValue("id"))
	if t == nil {
		return nil, nil, notFound("task")
	}
	return r, t, nil
}

func (b *Band) taskLocked(r *room, ref string) *task {
	for _, t := range b.tasks[r.id] {
		if t.ID == ref || strconv.Itoa(t.Number) == ref {
			return t
		}
	}
	return nil
}

// serveCreateTask creates a task on the room's board. Every POST creates
// a new one: Band has no idempotency key for tasks.
func (b *Band) serveCreateTask(c *call) reply {
	var body struct {
		Subject      *string `json:"subject"`
		Detail       string  `json:"detail"`
		SupersedesID string  `json:"supersedes_id"`
	}
	if err := decodeBody(c.r, &body); err != nil {
		return errReply(unprocessable("validation_error", "body must be a JSON object", "/", "is invalid"))
	}
	switch {
	case body.Subject == nil || isBlank(*body.Subject):
		return errReply(unprocessable("validation_error", "subject can't be blank", "/subject", "can't be blank"))
	case len([]rune(*body.Subject)) > taskSubjectMax:
		return errReply(unprocessable("validation_error", "subject is too long", "/subject", "is too long"))
	case len([]rune(body.Detail)) > taskDetailMax:
		return errReply(unprocessable("validation_error", "detail is too long", "/detail", "is too long"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	var old *task
	if body.SupersedesID != "" {
		if old = b.taskLocked(r, body.SupersedesID); old == nil || old.State != "active" {
			return errReply(unprocessable("validation_error", "supersedes_id names no active task", "/supersedes_id", "is invalid"))
		}
	}
	b.taskNumbers[r.id]++
	now := b.stamp()
	t := &task{Task: Task{ID: b.ids.uuid(), RoomID: r.id, CreatorID: c.who.id, Subject: *body.Subject, Detail: body.Detail,
		State: "active", Number: b.taskNumbers[r.id]}, at: now, upd: now}
	t.history = append(t.history, taskEventJSON{Actor: actor(c.who), At: now, Event: "created",
		Payload: map[string]any{"subject": t.Subject, "detail": t.Detail}})
	t.Seq = b.truth.record(Event{Kind: EventTask, AgentID: c.who.id, RoomID: r.id, Detail: t.ID})
	if old != nil {
		old.State, old.SupersededByID, old.upd = "superseded", t.ID, now
		old.history = append(old.history, taskEventJSON{Actor: actor(c.who), At: now, Event: "superseded",
			Payload: map[string]any{"state": map[string]any{"from": "active", "to": "superseded"}, "superseded_by_id": t.ID}})
	}
	b.tasks[r.id] = append(b.tasks[r.id], t)
	return okReply(http.StatusCreated, b.renderTask(t, false))
}

// serveTasks lists the board's tasks by number, cursor-paged: the active
// ones unless ?state= says otherwise ("all" for every state).
func (b *Band) serveTasks(c *call) reply {
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "active"
	}
	if state != "all" && state != "superseded" && !slices.Contains(taskStates, state) {
		return errReply(unprocessable("validation_error", "state is invalid", "/state", "is invalid"))
	}
	limit, err := intParam(q, "limit", taskPageDefault, maxPageSize)
	if err != nil {
		return errReply(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	var all []*task
	for _, t := range b.tasks[r.id] {
		if state == "all" || t.State == state {
			all = append(all, t)
		}
	}
	start, bad := cursorStart(q, len(all))
	if bad != nil {
		return errReply(bad)
	}
	items := []taskJSON{}
	for _, t := range all[start:min(start+limit, len(all))] {
		items = append(items, b.renderTask(t, false))
	}
	return reply{status: http.StatusOK, data: items, meta: cursorPage(start, limit, len(all))}
}

// cursorPage is the metadata of the page [start, start+limit) of total.
func cursorPage(start, limit, total int) cursorMetaJSON {
	meta := cursorMetaJSON{Limit: limit}
	if start+limit < total {
		next := encodeCursor(start + limit)
		meta.HasMore, meta.NextCursor = true, &next
	}
	return meta
}

func (b *Band) serveTask(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, t, err := b.pathTaskLocked(c)
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, b.renderTask(t, c.r.URL.Query().Get("include") == "history"))
}

// serveTaskHistory pages a task's history, oldest first.
func (b *Band) serveTaskHistory(c *call) reply {
	q := c.r.URL.Query()
	limit, err := intParam(q, "limit", taskPageDefault, maxPageSize)
	if err != nil {
		return errReply(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, t, err := b.pathTaskLocked(c)
	if err != nil {
		return errReply(err)
	}
	start, bad := cursorStart(q, len(t.history))
	if bad != nil {
		return errReply(bad)
	}
	items := slices.Clone(t.history[start:min(start+limit, len(t.history))])
	return reply{status: http.StatusOK, data: items, meta: cursorPage(start, limit, len(t.history))}
}

// serveUpdateTask applies one update. Status, active_form and
// linked_native_id are the caller's own assignment (the first status joins
// it); comment appends to the history, every time it is sent; work fields
// need an active task.
func (b *Band) serveUpdateTask(c *call) reply {
	var body struct {
		Status         *string `json:"status"`
		ActiveForm     *string `json:"active_form"`
		Comment        *string `json:"comment"`
		Subject        *string `json:"subject"`
		Detail         *string `json:"detail"`
		LinkedNativeID *string `json:"linked_native_id"`
		State          *string `json:"state"`
	}
	if err := decodeBody(c.r, &body); err != nil {
		return errReply(unprocessable("validation_error", "body must be a JSON object", "/", "is invalid"))
	}
	switch {
	case body.Status == nil && body.ActiveForm == nil && body.Comment == nil && body.Subject == nil &&
		body.Detail == nil && body.LinkedNativeID == nil && body.State == nil:
		return errReply(unprocessable("validation_error", "at least one field is required", "/", "is empty"))
	case body.Status != nil && !slices.Contains(taskStatuses, *body.Status):
		return errReply(unprocessable("validation_error", "status is invalid", "/status", "is invalid"))
	case body.State != nil && !slices.Contains(taskStates, *body.State):
		return errReply(unprocessable("validation_error", "state is invalid", "/state", "is invalid"))
	case body.Comment != nil && (isBlank(*body.Comment) || len([]rune(*body.Comment)) > taskCommentMax):
		return errReply(unprocessable("validation_error", "comment must be non-blank and at most 16384 characters", "/comment", "is invalid"))
	case body.Subject != nil && isBlank(*body.Subject):
		return errReply(unprocessable("validation_error", "subject can't be blank", "/subject", "can't be blank"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, t, err := b.pathTaskLocked(c)
	if err != nil {
		return errReply(err)
	}
	work := body.Status != nil || body.ActiveForm != nil || body.Comment != nil || body.Subject != nil || body.Detail != nil || body.LinkedNativeID != nil
	if work && t.State != "active" && !(body.State != nil && *body.State == "active") {
		return errReply(unprocessable("task_not_active", "only an active task accepts work", "/state", "is not active"))
	}
	now := b.stamp()
	who := actor(c.who)
	add := func(event string, payload map[string]any) {
		t.history = append(t.history, taskEventJSON{Actor: who, At: now, Event: event, Payload: payload})
	}
	if body.State != nil && *body.State == "active" && t.State == "archived" {
		t.State = "active"
		add("unarchived", map[string]any{"state": map[string]any{"from": "archived", "to": "active"}})
	}
	edit := map[string]any{}
	if body.Subject != nil && *body.Subject != t.Subject {
		edit["subject"] = map[string]any{"from": t.Subject, "to": *body.Subject}
		t.Subject = *body.Subject
	}
	if body.Detail != nil && *body.Detail != t.Detail {
		edit["detail"] = map[string]any{"from": t.Detail, "to": *body.Detail}
		t.Detail = *body.Detail
	}
	if len(edit) > 0 {
		add("edited", edit)
	}
	if body.Status != nil || body.ActiveForm != nil || body.LinkedNativeID != nil {
		i := slices.IndexFunc(t.Assignments, func(a TaskAssignment) bool { return a.AssigneeID == c.who.id })
		if i < 0 {
			t.Assignments = append(t.Assignments, TaskAssignment{AssigneeID: c.who.id, Status: "pending"})
			i = len(t.Assignments) - 1
		}
		a := &t.Assignments[i]
		if body.Status != nil && *body.Status != a.Status {
			p := map[string]any{"status": map[string]any{"from": a.Status, "to": *body.Status}}
			if body.LinkedNativeID != nil {
				p["linked_native_id"] = *body.LinkedNativeID
			}
			add("status_changed", p)
			a.Status = *body.Status
		}
		if body.ActiveForm != nil {
			a.ActiveForm = *body.ActiveForm
		}
		if body.LinkedNativeID != nil {
			a.LinkedNativeID = *body.LinkedNativeID
		}
	}
	if body.Comment != nil {
		add("commented", map[string]any{"text": *body.Comment})
		seq := b.truth.record(Event{Kind: EventTaskComment, AgentID: c.who.id, RoomID: r.id, Detail: t.ID})
		t.Comments = append(t.Comments, TaskComment{Seq: seq, AuthorID: c.who.id, Text: *body.Comment})
	}
	if body.State != nil && *body.State != "active" && *body.State != t.State {
		add(*body.State, map[string]any{"state": map[string]any{"from": t.State, "to": *body.State}})
		t.State = *body.State
	}
	t.upd = now
	return okReply(http.StatusOK, b.renderTask(t, false))
}

func (b *Band) renderBoard(r *room, bd *board, history bool) boardJSON {
	j := boardJSON{ChatRoomID: r.id}
	if bd != nil && bd.set {
		title, summary, at, upd := bd.GoalTitle, bd.GoalSummary, bd.at, bd.upd
		cb, ub := actor(bd.createdBy), actor(bd.updatedBy)
		j.GoalTitle, j.GoalSummary, j.InsertedAt, j.UpdatedAt, j.CreatedBy, j.UpdatedBy = &title, &summary, &at, &upd, &cb, &ub
	}
	if history {
		var h []taskEventJSON
		if bd != nil {
			h = bd.history[max(0, len(bd.history)-taskHistoryEmbed):]
		}
		truncated := bd != nil && len(bd.history) > taskHistoryEmbed
		j.History, j.HistoryTruncated = append([]taskEventJSON{}, h...), &truncated
	}
	return j
}

func (b *Band) serveBoard(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	return okReply(http.StatusOK, b.renderBoard(r, b.boards[r.id], c.r.URL.Query().Get("include") == "history"))
}

// servePutBoard sets the fields of the goal it is sent; a PUT that
// changes nothing records nothing, so a repeat has the effect of one.
func (b *Band) servePutBoard(c *call) reply {
	var body struct {
		GoalTitle   *string `json:"goal_title"`
		GoalSummary *string `json:"goal_summary"`
	}
	if err := decodeBody(c.r, &body); err != nil {
		return errReply(unprocessable("validation_error", "body must be a JSON object", "/", "is invalid"))
	}
	if body.GoalTitle == nil && body.GoalSummary == nil {
		return errReply(unprocessable("validation_error", "send goal_title or goal_summary", "/", "is empty"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	bd := b.boards[r.id]
	now := b.stamp()
	if bd == nil {
		bd = &board{createdBy: c.who, at: now}
		b.boards[r.id] = bd
	}
	change := map[string]any{}
	if v := body.GoalTitle; v != nil && (*v != bd.GoalTitle || !bd.set) {
		change["goal_title"] = map[string]any{"from": bd.GoalTitle, "to": *v}
		bd.GoalTitle = *v
	}
	if v := body.GoalSummary; v != nil && (*v != bd.GoalSummary || !bd.set) {
		change["goal_summary"] = map[string]any{"from": bd.GoalSummary, "to": *v}
		bd.GoalSummary = *v
	}
	if len(change) > 0 {
		event := "goal_edited"
		if !bd.set {
			event = "goal_set"
		}
		bd.set, bd.updatedBy, bd.upd = true, c.who, now
		bd.Changes++
		bd.history = append(bd.history, taskEventJSON{Actor: actor(c.who), At: now, Event: event, Payload: change})
		b.truth.record(Event{Kind: EventBoard, AgentID: c.who.id, RoomID: r.id, Detail: bd.GoalTitle})
	}
	return okReply(http.StatusOK, b.renderBoard(r, bd, false))
}

// Tasks returns the room's tasks in board order, with their comments and
// assignments.
func (b *Band) Tasks(roomID string) []Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Task, 0, len(b.tasks[roomID]))
	for _, t := range b.tasks[roomID] {
		c := t.Task
		c.Comments, c.Assignments = slices.Clone(t.Comments), slices.Clone(t.Assignments)
		out = append(out, c)
	}
	return out
}

// RoomBoard returns the room's goal; ok is false while none is set.
func (b *Band) RoomBoard(roomID string) (bd Board, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if x := b.boards[roomID]; x != nil && x.set {
		return x.Board, true
	}
	return Board{}, false
}
