package bandonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// ErrWriteGone is returned by a guarded write (StoreMemory, CreateTask,
// UpdateTask with a comment, CreateRoom) whose key the ledger records as
// done when Band no longer shows the write, say a memory a human deleted:
// it is not made again, and there is no result to return.
var ErrWriteGone = errors.New("bandonce: the ledger records the write, but Band no longer shows it")

// Memory is a memory for Message.StoreMemory: the fields of Band's
// AgentMemoryCreateRequest, and the key that names it as a unit of work.
type Memory struct {
	// Content is what to remember. Content, System, Type, Segment and
	// Thought are required.
	Content string
	// System is "sensory", "working" or "long_term"; Type one of its
	// types (iconic, echoic, haptic for sensory; episodic, semantic,
	// procedural otherwise); Segment "user", "agent", "tool" or
	// "guideline".
	System, Type, Segment string
	// Thought is why the agent stores it.
	Thought string
	// Scope is "subject" (the default, about SubjectID) or "organization"
	// (every agent of the organization, no subject).
	Scope, SubjectID string
	// Metadata is the memory's metadata ("tags", "references"). Its
	// "dedup_key" member is the shell's: leave it unset.
	Metadata map[string]any
	// DedupKey names the memory as a unit of work. Memories are the
	// agent's, not a room's: a memory is stored at most once per key and
	// agent, and a turn in any room that stores one under a key already
	// used (with the same subject, scope, system, type and segment) gets
	// the memory stored first. Empty means "msg:<message id>:memory:<n>",
	// n counting this turn's StoreMemory calls without a DedupKey.
	DedupKey string
}

// Task is a task for Message.CreateTask, on the room's board.
type Task struct {
	// Subject is what needs doing; required.
	Subject string
	// Detail describes it; the shell appends the key's marker to it as
	// its last line, where the guard finds it again. It is at most 16115
	// characters: Band's 16384, less room for the longest marker.
	Detail string
	// SupersedesID names the active task (UUID or board number) it
	// replaces.
	SupersedesID string
	// DedupKey names the task as a unit of work; it is created at most
	// once per room. Empty means "msg:<message id>:task:<n>", n counting
	// this turn's CreateTask calls without a DedupKey.
	DedupKey string
}

// TaskUpdate is an update for Message.UpdateTask; every field "" is left
// alone. Without a Comment an update only sets state (a repeat has the
// effect of one) and needs no guard; a Comment is appended to the task's
// history and is guarded like a message.
type TaskUpdate struct {
	// Status is the agent's own progress: pending, in_progress, blocked,
	// in_review, failed or completed (the first joins it to the task).
	Status string
	// ActiveForm is its "doing X" sentence on the board.
	ActiveForm string
	// Comment is a note for the others; the shell appends the key's
	// marker as its last line. At most 16115 characters, as a detail.
	Comment string
	// Subject and Detail edit the task; State cancels it ("cancelled"),
	// archives it ("archived") or restores it ("active"). A new Detail of
	// a task this turn created or found keeps the task's marker.
	Subject, Detail, State string
	// LinkedNativeID links the agent's assignment to its own tooling.
	LinkedNativeID string
	// DedupKey names the comment; it is posted at most once per room.
	// Empty means "msg:<message id>:comment:<n>", n counting this turn's
	// comments without a DedupKey. Ignored without a Comment.
	DedupKey string
}

// markerRoom is the most characters a key's marker line adds to a text:
// a line break, "[dedup_key:", the longest key and "]".
const markerRoom = len("\n[dedup_key:]") + lifecycle.MaxKeyLen

// Limits on what the guarded writes carry.
const (
	maxMemoryContent = 16384 // characters
	maxTaskText      = 16384 // characters, of a detail or a comment, its marker included
	maxRoomTitle     = 120   // characters, Band's limit on a room title
)

// StoreMemory stores a memory at most once per dedup key, with the guard
// of a message: the ledger first, Band read only when it can hold the
// key (the memories of the same subject, scope, system, type and segment,
// of every status, searched for the key in their metadata), and never a
// blind repeat after an ambiguous outcome. The key travels in the
// memory's metadata ("dedup_key").
//
// It returns the memory, whether this call stored it or an earlier
// delivery did. After an interrupt or a stop reached the room it stores
// nothing and returns the cause; a Band refusal is an *APIError wrapped
// with Permanent.
func (m *Message) StoreMemory(ctx context.Context, mem Memory) (band.Memory, error) {
	if m.turn == nil {
		return band.Memory{}, ErrNotInTurn
	}
	if err := validateMemory(&mem); err != nil {
		return band.Memory{}, fmt.Errorf("bandonce: store memory: %w", err)
	}
	t := m.turn
	client := t.r.s.client
	return guardWrite(ctx, t, write[band.Memory]{
		kind: "memory", call: band.EndpointCreateMemory, key: mem.DedupKey,
		find: func(ctx context.Context, key string) (band.Memory, bool, error) {
			ms, err := client.Memories(ctx, band.MemoryFilter{SubjectID: mem.SubjectID, Scope: mem.Scope,
				System: mem.System, Type: mem.Type, Segment: mem.Segment, Status: "all"})
			if err != nil {
				return band.Memory{}, false, err
			}
			me := t.r.s.agentID()
			for _, x := range ms {
				if x.SourceAgentID == me && x.Metadata[lifecycle.MetadataKey] == key {
					return x, true, nil
				}
			}
			return band.Memory{}, false, nil
		},
		do: func(ctx context.Context, key string) (band.Memory, error) {
			return client.CreateMemory(ctx, band.NewMemory{Content: mem.Content, System: mem.System, Type: mem.Type,
				Segment: mem.Segment, Thought: mem.Thought, Scope: mem.Scope, SubjectID: mem.SubjectID,
				Metadata: withKey(mem.Metadata, key)})
		},
	})
}

func validateMemory(mem *Memory) error {
	for name, v := range map[string]string{"content": mem.Content, "system": mem.System, "type": mem.Type,
		"segment": mem.Segment, "thought": mem.Thought} {
		if lifecycle.Blank(v) {
			return Permanent(fmt.Errorf("%s is blank", name))
		}
	}
	if n := utf8.RuneCountInString(mem.Content); n > maxMemoryContent {
		return Permanent(fmt.Errorf("content is %d characters; at most %d", n, maxMemoryContent))
	}
	if mem.Scope == "" {
		mem.Scope = "subject"
	}
	if mem.Scope == "subject" && mem.SubjectID == "" {
		return Permanent(errors.New(`a "subject" memory needs a SubjectID`))
	}
	if _, taken := mem.Metadata[lifecycle.MetadataKey]; taken {
		return Permanent(fmt.Errorf("metadata member %q is reserved for the dedup key; set DedupKey instead", lifecycle.MetadataKey))
	}
	if _, err := json.Marshal(mem.Metadata); err != nil {
		return Permanent(fmt.Errorf("metadata does not encode as JSON: %w", err))
	}
	mem.Metadata = maps.Clone(mem.Metadata)
	return checkKey(mem.DedupKey)
}

// CreateTask creates a task on the room's board at most once per dedup
// key, guarded like a message: the key's marker is the detail's last line,
// and the guard reads the board (every state) for a task this agent
// created with it. It returns the task, whether this call created it or
// an earlier delivery did. The errors are StoreMemory's.
func (m *Message) CreateTask(ctx context.Context, task Task) (band.Task, error) {
	if m.turn == nil {
		return band.Task{}, ErrNotInTurn
	}
	switch n := utf8.RuneCountInString(task.Detail); {
	case lifecycle.Blank(task.Subject):
		return band.Task{}, fmt.Errorf("bandonce: create task: %w", Permanent(errors.New("subject is blank")))
	case n > maxTaskText-markerRoom:
		return band.Task{}, fmt.Errorf("bandonce: create task: %w", Permanent(fmt.Errorf("detail is %d characters; at most %d, with room for the key's marker", n, maxTaskText-markerRoom)))
	}
	if err := checkKey(task.DedupKey); err != nil {
		return band.Task{}, fmt.Errorf("bandonce: create task: %w", err)
	}
	t := m.turn
	client, room := t.r.s.client, t.r.id
	created, err := guardWrite(ctx, t, write[band.Task]{
		kind: "task", call: band.EndpointCreateTask, key: task.DedupKey,
		find: func(ctx context.Context, key string) (band.Task, bool, error) {
			ts, err := client.Tasks(ctx, room, "all")
			if err != nil {
				return band.Task{}, false, err
			}
			me := t.r.s.agentID()
			for _, x := range ts {
				if k, ok := lifecycle.ParseMarker(x.Detail); ok && k == key && x.CreatedBy.ID == me {
					return x, true, nil
				}
			}
			return band.Task{}, false, nil
		},
		do: func(ctx context.Context, key string) (band.Task, error) {
			return client.CreateTask(ctx, room, band.NewTask{Subject: task.Subject, Detail: marked(task.Detail, key), SupersedesID: task.SupersedesID})
		},
	})
	if err == nil {
		t.noteMark(created)
	}
	return created, err
}

// noteMark remembers the key task's detail carries, so that an update of
// the detail in this turn keeps it: without its marker, a redelivery of
// the turn would find no task and create it again.
func (t *turn) noteMark(task band.Task) {
	key, ok := lifecycle.ParseMarker(task.Detail)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.marks == nil {
		t.marks = map[string]string{}
	}
	t.marks[task.ID] = key
	if task.Number > 0 {
		n := strconv.Itoa(task.Number)
		t.marks[n], t.marks["#"+n] = key, key
	}
}

// markOf returns the key the detail of the task named taskID carries, if
// this turn created or found it.
func (t *turn) markOf(taskID string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key, ok := t.marks[taskID]
	return key, ok
}

// UpdateTask updates a task of the room's board (by UUID or board
// number). What an update sets (status, active form, subject, detail,
// link, lifecycle) is idempotent by nature: it is sent at every delivery,
// in the order the handler makes its updates, so the task ends in the
// state of the turn's last update (Band's history may show a repeat as a
// row of its own, never a second effect). A Comment is guarded like a
// message: its last line is the key's marker, the guard reads the task's
// history for a comment this agent posted with it, and a comment found
// there is not posted again (the state that came with it is set again).
// After an interrupt or a stop reached the room it changes nothing and
// returns the cause.
func (m *Message) UpdateTask(ctx context.Context, taskID string, u TaskUpdate) (band.Task, error) {
	if m.turn == nil {
		return band.Task{}, ErrNotInTurn
	}
	t := m.turn
	client, room := t.r.s.client, t.r.id
	if n := utf8.RuneCountInString(u.Detail); n > maxTaskText-markerRoom {
		return band.Task{}, fmt.Errorf("bandonce: update task: %w", Permanent(fmt.Errorf("detail is %d characters; at most %d, with room for the key's marker", n, maxTaskText-markerRoom)))
	}
	up := band.TaskUpdate{Status: u.Status, ActiveForm: u.ActiveForm, Subject: u.Subject, Detail: u.Detail,
		LinkedNativeID: u.LinkedNativeID, State: u.State}
	if key, ok := t.markOf(taskID); ok && u.Detail != "" {
		up.Detail = marked(u.Detail, key) // the guard of the task's creation finds it by this
	}
	if u.Comment == "" {
		return unguarded(ctx, t, func(ctx context.Context) (band.Task, error) {
			return t.setTaskState(ctx, taskID, up)
		})
	}
	if n := utf8.RuneCountInString(u.Comment); lifecycle.Blank(u.Comment) || n > maxTaskText-markerRoom {
		return band.Task{}, fmt.Errorf("bandonce: update task: %w", Permanent(fmt.Errorf("comment is blank or longer than %d characters, with room for the key's marker", maxTaskText-markerRoom)))
	}
	if err := checkKey(u.DedupKey); err != nil {
		return band.Task{}, fmt.Errorf("bandonce: update task: %w", err)
	}
	task, fresh, err := guardWriteFresh(ctx, t, write[band.Task]{
		kind: "comment", call: band.EndpointUpdateTask, key: u.DedupKey,
		find: func(ctx context.Context, key string) (band.Task, bool, error) {
			history, err := client.TaskHistory(ctx, room, taskID)
			if err != nil {
				return band.Task{}, false, err
			}
			me := t.r.s.agentID()
			for _, e := range history {
				text, _ := e.Payload["text"].(string)
				if k, ok := lifecycle.ParseMarker(text); ok && k == key && e.Event == "commented" && e.Actor.ID == me {
					task, err := client.Task(ctx, room, taskID)
					return task, err == nil, err
				}
			}
			return band.Task{}, false, nil
		},
		do: func(ctx context.Context, key string) (band.Task, error) {
			up := up
			up.Comment = lifecycle.AppendMarker(u.Comment, key)
			return client.UpdateTask(ctx, room, taskID, up)
		},
	})
	if err != nil || fresh || up == (band.TaskUpdate{}) {
		return task, err
	}
	// The comment was posted before; the state it came with is set again,
	// as every state-setting update of a redelivered turn is, so that a
	// state set earlier in the turn (and set again by this delivery) does
	// not outlast it.
	return unguarded(ctx, t, func(ctx context.Context) (band.Task, error) {
		return t.setTaskState(ctx, taskID, up)
	})
}

// setTaskState sends an update that only sets state. On a redelivery a
// task that no longer takes work (Band's 422 task_not_active) was moved on
// since the last delivery, by the turn's own later update (archived, say)
// or by a person: the state is not set again, and the task is returned as
// it is, so the turn goes on instead of failing for good.
func (t *turn) setTaskState(ctx context.Context, taskID string, up band.TaskUpdate) (band.Task, error) {
	client, room := t.r.s.client, t.r.id
	task, err := client.UpdateTask(ctx, room, taskID, up)
	var apiErr *APIError
	if err == nil || t.attempt <= 1 || !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || apiErr.Code != "task_not_active" {
		return task, err
	}
	t.r.s.log.Info("bandonce: the task no longer takes work; its state is not set again on this redelivery", "room", room, "task", taskID)
	return client.Task(ctx, room, taskID)
}

// SetGoal sets the room's goal, the fields of g that are not nil. Setting
// a goal is idempotent by nature (the same PUT again leaves the board as
// one does), so it needs no guard. After an interrupt or a stop reached
// the room it changes nothing and returns the cause.
func (m *Message) SetGoal(ctx context.Context, g band.Goal) (band.Board, error) {
	if m.turn == nil {
		return band.Board{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.Board, error) {
		return m.turn.r.s.client.SetGoal(ctx, m.RoomID, g)
	})
}

// SupersedeMemory marks a memory this agent stored as superseded, and
// ArchiveMemory archives one: changes of state, idempotent by nature, sent
// without a guard. After an interrupt or a stop reached the room they
// change nothing and return the cause.
func (m *Message) SupersedeMemory(ctx context.Context, id string) (band.Memory, error) {
	if m.turn == nil {
		return band.Memory{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.Memory, error) {
		return m.turn.r.s.client.SupersedeMemory(ctx, id)
	})
}

// ArchiveMemory archives a memory this agent stored; see SupersedeMemory.
func (m *Message) ArchiveMemory(ctx context.Context, id string) (band.Memory, error) {
	if m.turn == nil {
		return band.Memory{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.Memory, error) {
		return m.turn.r.s.client.ArchiveMemory(ctx, id)
	})
}

// CreateRoom creates a room owned by the agent, at most once per message
// and call: the n-th CreateRoom of a turn has the key
// "msg:<message id>:room:<n>". A titled room is guarded like a message:
// its title ends with a short marker derived from the agent, the room of
// the turn and the key (" [bo:<12 hex digits>]"), and the guard reads the
// agent's rooms for it before creating one, so a crash between Band
// creating the room and the ledger recording it does not make a second.
// The title must leave room for the marker: at most 104 characters. A
// rename that drops the marker (band.Client.RenameRoom) hides the room
// from the guard of a later delivery of the same turn.
//
// An untitled room ("" lets Band title it from its first message) carries
// nothing a read could find, so it is a Step: at most once as far as the
// Ledger knows, and a crash between the creation and the record creates a
// second room on the redelivery.
func (m *Message) CreateRoom(ctx context.Context, title string) (band.Room, error) {
	if m.turn == nil {
		return band.Room{}, ErrNotInTurn
	}
	t := m.turn
	client := t.r.s.client
	if strings.TrimSpace(title) == "" {
		t.mu.Lock()
		p := t.placeOf(ctx)
		n := p.count("untitled-room")
		t.mu.Unlock()
		name := lifecycle.ReservedPrefix + "create-room" + p.prefix + ":" + strconv.Itoa(n)
		raw, err := t.step(ctx, name, func(ctx context.Context, _ string) ([]byte, error) {
			room, err := client.CreateRoom(ctx, "")
			if err != nil {
				return nil, err
			}
			return json.Marshal(room)
		})
		if err != nil {
			return band.Room{}, err
		}
		var room band.Room
		if err := json.Unmarshal(raw, &room); err != nil {
			return band.Room{}, fmt.Errorf("bandonce: %s: recorded result: %w", name, err)
		}
		return room, nil
	}
	title = strings.TrimSpace(title)
	if n := utf8.RuneCountInString(title) + len(" [bo:]") + roomMarkerDigits; n > maxRoomTitle {
		return band.Room{}, fmt.Errorf("bandonce: create room: %w", Permanent(fmt.Errorf("title with its marker is %d characters; Band takes at most %d", n, maxRoomTitle)))
	}
	if strings.ContainsAny(title, "\r\n\x00") {
		return band.Room{}, fmt.Errorf("bandonce: create room: %w", Permanent(errors.New("title must not contain line breaks")))
	}
	return guardWrite(ctx, t, write[band.Room]{
		kind: "room", call: "POST /agent/chats",
		find: func(ctx context.Context, key string) (band.Room, bool, error) {
			rooms, err := client.Rooms(ctx)
			if err != nil {
				return band.Room{}, false, err
			}
			suffix := t.roomMarker(key)
			for _, r := range rooms {
				if strings.HasSuffix(r.Title, suffix) {
					return r, true, nil
				}
			}
			return band.Room{}, false, nil
		},
		do: func(ctx context.Context, key string) (band.Room, error) {
			return client.CreateRoom(ctx, title+t.roomMarker(key))
		},
	})
}

// roomMarkerDigits is how many hex digits of the digest a room's marker
// shows: 48 bits, so that two of one agent's rooms collide with odds
// below one in ten million even at ten thousand rooms.
const roomMarkerDigits = 12

// roomMarker is the suffix of a guarded room's title: a digest of the
// agent, the turn's room and the key, since the key itself may be long.
func (t *turn) roomMarker(key string) string {
	h := sha256.New()
	for _, part := range []string{t.r.s.agentID(), t.r.id, key} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return " [bo:" + hex.EncodeToString(h.Sum(nil))[:roomMarkerDigits] + "]"
}

// marked is a task's detail with the key's marker as its last line.
func marked(detail, key string) string {
	if strings.TrimSpace(detail) == "" {
		return lifecycle.AppendMarker("", key)[1:] // the marker alone
	}
	return lifecycle.AppendMarker(detail, key)
}

func checkKey(key string) error {
	if key == "" {
		return nil
	}
	if err := lifecycle.ValidateKey(key); err != nil {
		return Permanent(err)
	}
	return nil
}

// write is one write of Band's agent API that Band has no idempotency key
// for, and the read that finds it again by its key.
type write[T any] struct {
	kind string // "memory", "task", "comment", "room": its default keys and records
	call string // the endpoint, for errors
	key  string // "" for a default key
	// find reads Band for the write carrying key; do makes it, key
	// attached, once.
	find func(ctx context.Context, key string) (T, bool, error)
	do   func(ctx context.Context, key string) (T, error)
}

// guardWrite makes w at most once per key in the turn's room, the way
// send guards a message: the ledger first (its recorded result, then the
// key's state), Band read only when it can hold the key, the intent on
// record before the request, and after an ambiguous outcome a fresh read
// before any repeat.
func guardWrite[T any](ctx context.Context, t *turn, w write[T]) (T, error) {
	v, _, err := guardWriteFresh(ctx, t, w)
	return v, err
}

// guardWriteFresh is guardWrite that also reports whether this call made
// the write (fresh) rather than finding it made.
func guardWriteFresh[T any](ctx context.Context, t *turn, w write[T]) (_ T, fresh bool, _ error) {
	var zero T
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return zero, false, ErrNotInTurn
	}
	isDefault := w.key == ""
	if isDefault {
		p := t.placeOf(ctx)
		w.key = DefaultKey(t.msgID) + p.prefix + ":" + w.kind + ":" + strconv.Itoa(p.count(w.kind))
	}
	if err := t.forbidden(ctx); err != nil {
		return zero, false, err
	}
	r := t.r
	ledger := r.s.cfg.Ledger
	ectx, cancel := t.effectCtx(ctx)
	defer cancel()
	fail := func(what string, err error) (T, bool, error) {
		return zero, false, fmt.Errorf("bandonce: %s (key %q): %s: %w", w.call, w.key, what, err)
	}
	// The write's record names its result among the message's steps and
	// its key's state among the room's keys: a kind of its own, so a
	// memory, a task and a reply may share one natural key.
	record := lifecycle.RecordName(w.kind, w.key)
	if raw, ok, err := ledger.Step(ectx, r.id, t.msgID, record); err != nil {
		r.s.ledgerFailed("bandonce: ledger read failed; not writing", err, "room", r.id, "key", w.key)
		return fail("ledger read", err)
	} else if ok {
		var v T
		if err := json.Unmarshal(raw, &v); err == nil {
			return v, false, nil
		}
	}
	state, err := ledger.Key(ectx, r.id, record)
	if err != nil {
		r.s.ledgerFailed("bandonce: ledger read failed; not writing", err, "room", r.id, "key", w.key)
		return fail("ledger read", err)
	}
	// Checked stays false: the room check a durable ledger gets (against
	// the room's posts) says nothing of memories, tasks or rooms, so its
	// "no record" for them is never taken as proof, and Band is read.
	facts := lifecycle.GuardFacts{Ledger: knowledge(state), Durable: ledger.Durable(), Attempt: t.attempt, DefaultKey: isDefault || derivedKey(t.msgID, w.key)}
	for try := 0; ; try++ {
		if lifecycle.Guard(facts) != lifecycle.PostNow {
			if at := r.s.late.settledAt(r.id, record, t.inherited); time.Now().Before(at) {
				// A write of this key, by this life or an earlier one,
				// may still be applied: a read now that does not find it
				// proves nothing.
				if err := t.settle(ctx, at); err != nil {
					return fail("unsettled", err)
				}
			}
			v, found, err := w.find(ectx, w.key)
			switch {
			case err != nil:
				return fail("reading Band for it", err)
			case found:
				t.recordWrite(ectx, record, w.key, KeyDuplicateDropped, v)
				r.s.log.Info("bandonce: already on Band; not writing it again", "room", r.id, "key", w.key, "write", w.kind)
				return v, false, nil
			case facts.Ledger == lifecycle.InRoom:
				return zero, false, fmt.Errorf("bandonce: %s (key %q): %w", w.call, w.key, ErrWriteGone)
			}
		}
		if err := t.forbidden(ctx); err != nil {
			return zero, false, err
		}
		if err := ledger.SetKey(ectx, r.id, record, KeyIntent); err != nil {
			// Without the intent on record a crash could hide this write
			// from a durable ledger: do not make it.
			r.s.ledgerFailed("bandonce: ledger write failed; not writing", err, "room", r.id, "key", w.key)
			return fail("ledger write", err)
		}
		v, err := w.do(wire.WithStartCheck(ectx, func() error { return t.forbidden(ctx) }), w.key)
		var notSent *wire.NotSentError
		var apiErr *APIError
		switch {
		case err == nil:
			t.recordWrite(ectx, record, w.key, KeyAccepted, v)
			return v, true, nil
		case errors.As(err, &notSent):
			return zero, false, notSent.Err
		case errors.As(err, &apiErr) && !apiErr.Transient():
			// Refused: nothing was written. The intent stays; a later
			// delivery reads before it writes.
			if fatal := asFatal(err); fatal != nil {
				r.s.failRun(fatal)
				return fail("refused by Band", err)
			}
			return fail("refused by Band", Permanent(err))
		case ectx.Err() != nil:
			// Cut off in flight: it may still be applied (see post.go).
			r.s.late.unknown(r.id, t.msgID, record, time.Now())
			return fail("outcome unknown", err)
		}
		// Ambiguous: it may have been applied, or be applied later still.
		// Only a read once the write has settled can tell, so the next
		// pass waits for that before it reads, and writes only if the
		// read finds nothing; the message is not consumed meanwhile.
		r.s.late.unknown(r.id, t.msgID, record, time.Now())
		facts.Ledger = lifecycle.Intent
		if try+1 >= r.s.cfg.Retry.MaxAttempts {
			return fail("outcome unknown", err)
		}
		r.s.log.Warn("bandonce: write outcome unknown; reading Band once it has settled", "room", r.id, "key", w.key, "write", w.kind,
			"err", err, "wait", r.s.cfg.SettleWindow)
	}
}

// recordWrite records a write's result and its key's state, both under
// record (the key's name). A failed record is logged, under key: the
// write stands, and a later delivery finds it on Band.
func (t *turn) recordWrite(ctx context.Context, record, key string, state KeyState, v any) {
	r := t.r
	wctx, cancel := r.s.markCtx(ctx)
	defer cancel()
	if raw, err := json.Marshal(v); err == nil && len(raw) <= MaxStepResult {
		if err := r.s.cfg.Ledger.SetStep(wctx, r.id, t.msgID, record, raw); err != nil {
			r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "key", key)
		}
	}
	r.setKey(wctx, record, key, state)
}

// AddContact sends a contact request to handle, RemoveContact ends a
// contact, and RespondToContactRequest approves, rejects or cancels one
// (band.ContactApprove, ContactReject, ContactCancel): changes of state
// whose repeat Band answers 409 or 404 and the client recognises (the
// pending request found again, the contact already gone, the request
// already answered), so they need no guard. After an interrupt or a stop
// reached the room they change nothing and return the cause.
func (m *Message) AddContact(ctx context.Context, handle, message string) (band.ContactRequest, error) {
	if m.turn == nil {
		return band.ContactRequest{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.ContactRequest, error) {
		return m.turn.r.s.client.AddContact(ctx, handle, message)
	})
}

// RemoveContact ends the contact with handle; see AddContact.
func (m *Message) RemoveContact(ctx context.Context, handle string) error {
	if m.turn == nil {
		return ErrNotInTurn
	}
	_, err := unguarded(ctx, m.turn, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.turn.r.s.client.RemoveContact(ctx, handle)
	})
	return err
}

// RespondToContactRequest answers the contact request of handle; see
// AddContact.
func (m *Message) RespondToContactRequest(ctx context.Context, action, handle string) (band.ContactRequest, error) {
	if m.turn == nil {
		return band.ContactRequest{}, ErrNotInTurn
	}
	return unguarded(ctx, m.turn, func(ctx context.Context) (band.ContactRequest, error) {
		return m.turn.r.s.client.RespondToContactRequest(ctx, action, handle)
	})
}

// unguarded makes a write that needs no guard (a change of state): only
// while no signal reached the turn, asked before the call and again the
// moment each of its tries leaves (a retry after a 429 or a 5xx waits in
// the HTTP layer, where a signal may land), whatever ctx the handler
// passed.
func unguarded[T any](ctx context.Context, t *turn, do func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := t.forbidden(ctx); err != nil {
		return zero, err
	}
	// withheld is the cause of the first try the check kept from
	// leaving: a client that reads after a refusal (AddParticipant's
	// 409/422, RemoveParticipant's 404) may swallow the NotSentError and
	// return the refusal instead.
	var withheld error
	v, err := do(wire.WithStartCheck(ctx, func() error {
		cause := t.forbidden(ctx)
		if cause != nil && withheld == nil {
			withheld = cause
		}
		return cause
	}))
	var notSent *wire.NotSentError
	switch {
	case errors.As(err, &notSent):
		return zero, notSent.Err
	case err != nil && withheld != nil:
		return zero, withheld
	}
	return v, err
}
