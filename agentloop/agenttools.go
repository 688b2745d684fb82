package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
)

// The names of the tools of Band's agent API beyond the room, as the
// model sees them.
const (
	ToolStoreMemory = "band_store_memory"
	ToolCreateTask  = "band_create_task"
	ToolUpdateTask  = "band_update_task"
	ToolSetGoal     = "band_set_goal"
)

// agentTools are the tools of Band's agent API beyond the room's
// messages: store a memory, create a task on the room's board, update a
// task (status, "doing X" sentence, comment) and set the room's goal. Each
// goes through the Message's write (StoreMemory, CreateTask, UpdateTask,
// SetGoal) with the call's place in the turn (Call.Key) as its dedup key,
// so it keeps that write's guarantee: a memory, a task or a comment at
// most once per room, found again by its key and not written twice after
// a crash or a lost answer; a status or a goal set again at a replay with
// the effect of once.
//
// A write Band refuses (a 4xx other than 401 and 403), or that the
// Message refuses before any request (a blank subject, a subject memory
// without a subject), is the model's to read and correct: nothing was
// written.
func agentTools() []Tool {
	return []Tool{storeMemoryTool(), createTaskTool(), updateTaskTool(), setGoalTool()}
}

// maxToolText bounds a text field the model hands these tools, before
// the Message's own limits.
const maxToolText = 16384

func storeMemoryTool() Tool {
	return Tool{
		Name: ToolStoreMemory,
		Description: "Store a memory: something learned that a later conversation should know. By default it is a " +
			"long-term semantic memory about the sender of the message.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"content":{"type":"string","description":"What to remember."},` +
			`"thought":{"type":"string","description":"Why it is worth remembering."},` +
			`"system":{"type":"string","enum":["sensory","working","long_term"],"description":"Default long_term."},` +
			`"type":{"type":"string","enum":["iconic","echoic","haptic","episodic","semantic","procedural"],"description":"Default semantic."},` +
			`"segment":{"type":"string","enum":["user","agent","tool","guideline"],"description":"Default user."},` +
			`"scope":{"type":"string","enum":["subject","organization"],"description":"Default subject: about subject_id."},` +
			`"subject_id":{"type":"string","description":"Whom the memory is about; default the sender."},` +
			`"tags":{"type":"array","items":{"type":"string"}}},` +
			`"required":["content","thought"],"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Content   string   `json:"content"`
				Thought   string   `json:"thought"`
				System    string   `json:"system"`
				Type      string   `json:"type"`
				Segment   string   `json:"segment"`
				Scope     string   `json:"scope"`
				SubjectID string   `json:"subject_id"`
				Tags      []string `json:"tags"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			if len(a.Content) > maxToolText || len(a.Thought) > maxToolText {
				return "", Refuse(fmt.Sprintf("content and thought take at most %d bytes each", maxToolText))
			}
			mem := bandonce.Memory{Content: a.Content, Thought: a.Thought,
				System: or(a.System, "long_term"), Type: or(a.Type, "semantic"), Segment: or(a.Segment, "user"),
				Scope: or(a.Scope, "subject"), SubjectID: a.SubjectID, DedupKey: c.Key}
			if mem.Scope == "subject" && mem.SubjectID == "" {
				mem.SubjectID = c.Msg.SenderID
			}
			if len(a.Tags) > 0 {
				mem.Metadata = map[string]any{"tags": a.Tags[:min(len(a.Tags), 32)]}
			}
			stored, err := c.Msg.StoreMemory(ctx, mem)
			if err != nil {
				return "", refusable(err)
			}
			return "stored memory " + stored.ID, nil
		},
	}
}

func createTaskTool() Tool {
	return Tool{
		Name:        ToolCreateTask,
		Description: "Create a task on the chat room's board, to track a piece of work. Returns its id and its board number.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"subject":{"type":"string","description":"What needs doing."},` +
			`"detail":{"type":"string","description":"More about it."},` +
			`"supersedes":{"type":"string","description":"The id or board number of an active task this one replaces."}},` +
			`"required":["subject"],"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Subject    string `json:"subject"`
				Detail     string `json:"detail"`
				Supersedes string `json:"supersedes"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			task, err := c.Msg.CreateTask(ctx, bandonce.Task{Subject: a.Subject, Detail: a.Detail,
				SupersedesID: strings.TrimPrefix(a.Supersedes, "#"), DedupKey: c.Key})
			if err != nil {
				return "", refusable(err)
			}
			return fmt.Sprintf("created task #%d (id %s)", task.Number, task.ID), nil
		},
	}
}

func updateTaskTool() Tool {
	return Tool{
		Name: ToolUpdateTask,
		Description: "Update a task of the chat room's board: your status on it (the first joins you to it), " +
			"the sentence saying what you are doing, and a comment for the others.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"task":{"type":"string","description":"The task's id or board number (3 or #3)."},` +
			`"status":{"type":"string","enum":["pending","in_progress","blocked","in_review","failed","completed"]},` +
			`"active_form":{"type":"string","description":"What you are doing, as \"refunding order-17\"."},` +
			`"comment":{"type":"string","description":"A note for the others."}},` +
			`"required":["task"],"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Task       string `json:"task"`
				Status     string `json:"status"`
				ActiveForm string `json:"active_form"`
				Comment    string `json:"comment"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			id := strings.TrimPrefix(strings.TrimSpace(a.Task), "#")
			if id == "" {
				return "", Refuse("name the task by its id or board number")
			}
			if a.Status == "" && a.ActiveForm == "" && a.Comment == "" {
				return "", Refuse("give a status, an active_form or a comment")
			}
			if len(a.ActiveForm) > maxToolText || len(a.Comment) > maxToolText {
				return "", Refuse(fmt.Sprintf("active_form and comment take at most %d bytes each", maxToolText))
			}
			task, err := c.Msg.UpdateTask(ctx, id, bandonce.TaskUpdate{Status: a.Status, ActiveForm: a.ActiveForm,
				Comment: a.Comment, DedupKey: c.Key})
			if err != nil {
				return "", refusable(err)
			}
			return fmt.Sprintf("updated task #%d: %s", task.Number, or(task.OverallStatus, "ok")), nil
		},
	}
}

func setGoalTool() Tool {
	return Tool{
		Name:        ToolSetGoal,
		Description: "Set the chat room's goal on its board: a title and a summary.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"title":{"type":"string"},"summary":{"type":"string"}},` +
			`"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Title   *string `json:"title"`
				Summary *string `json:"summary"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			if a.Title == nil && a.Summary == nil {
				return "", Refuse("give a title, a summary or both")
			}
			if (a.Title != nil && len(*a.Title) > maxToolText) || (a.Summary != nil && len(*a.Summary) > maxToolText) {
				return "", Refuse(fmt.Sprintf("title and summary take at most %d bytes each", maxToolText))
			}
			if _, err := c.Msg.SetGoal(ctx, band.Goal{Title: a.Title, Summary: a.Summary}); err != nil {
				return "", refusable(err)
			}
			return "goal set", nil
		},
	}
}

// refusable turns a write's refusal, which wrote nothing, into the
// model's to read: the Message's own (Permanent, no request made) and
// Band's 4xx, except 401, 403, 408 and 429, which end the turn (the
// agent's key, or a transient answer the redelivery retries). A write the
// ledger records as done that Band no longer shows is told to the model
// too. Every other error ends the turn as it is.
func refusable(err error) error {
	if errors.Is(err, bandonce.ErrWriteGone) {
		return Refuse("this write was made earlier, but Band no longer shows it")
	}
	var api *bandonce.APIError
	if errors.As(err, &api) {
		switch {
		case api.Status/100 != 4, api.Status == http.StatusUnauthorized, api.Status == http.StatusForbidden,
			api.Status == http.StatusRequestTimeout, api.Status == http.StatusTooManyRequests:
			return err
		case api.Message != "":
			return Refuse("Band refused it (" + strconv.Itoa(api.Status) + "): " + api.Message)
		}
		return Refuse("Band refused it (" + strconv.Itoa(api.Status) + ")")
	}
	var perm *bandonce.PermanentError
	if errors.As(err, &perm) {
		return Refuse(err.Error())
	}
	return err
}

func or(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
