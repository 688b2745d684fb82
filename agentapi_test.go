package bandonce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
)

// boardHandler is an assistant's turn over Band's agent API: it stores
// what it learned as a memory, tracks its work as a task on the room's
// board (joined, then completed with a comment), sets the room's goal, opens a
// follow-up room, asks the sender to be a contact, and answers.
func boardHandler(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: "the sender asked for: " + m.Body(), System: "long_term",
		Type: "episodic", Segment: "user", Thought: "to recall the request later", SubjectID: m.SenderID,
		Metadata: map[string]any{"tags": []string{"refunds"}}}); err != nil {
		return nil, err
	}
	task, err := m.CreateTask(ctx, bandonce.Task{Subject: "handle: " + m.Body(), Detail: "asked in this room"})
	if err != nil {
		return nil, err
	}
	if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "in_progress", ActiveForm: "refunding"}); err != nil {
		return nil, err
	}
	// The comment comes with the status: a redelivery that finds the
	// comment must still leave the task completed, not in the in_progress
	// its first update sets again.
	if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed", Comment: "refunded"}); err != nil {
		return nil, err
	}
	goal := "refunds"
	if _, err := m.SetGoal(ctx, band.Goal{Title: &goal}); err != nil {
		return nil, err
	}
	room, err := m.CreateRoom(ctx, "follow-up: "+m.Body())
	if err != nil {
		return nil, err
	}
	ps, err := m.Participants(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.ID == m.SenderID {
			if _, err := m.AddContact(ctx, "@"+p.Handle, "thanks for asking"); err != nil {
				return nil, err
			}
		}
	}
	return &bandonce.Reply{Content: "done; follow-up in " + room.ID, Mentions: []string{m.SenderID}}, nil
}

// boardWrites counts, from the fake's truth, each write of boardHandler's
// turn for message id, by kind.
func boardWrites(t *testing.T, w *world, room fakeband.Room, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for key, n := range memoryKeys(t, w) {
		out["memory "+key] = n
	}
	for _, task := range w.band.Tasks(room.ID) {
		out["task "+strings.Split(task.Detail, "\n")[1]]++
		for _, c := range task.Comments {
			out["comment "+strings.Split(c.Text, "\n")[1]]++
		}
		for _, a := range task.Assignments {
			out["status "+a.Status]++
		}
	}
	for _, e := range w.band.Events() {
		if e.Kind == fakeband.EventRoom && strings.HasPrefix(e.Detail, "follow-up: ") {
			out["room"]++
		}
		if e.Kind == fakeband.EventContactRequest && e.Detail == w.human.ID {
			out["contact request"]++
		}
	}
	if bd, ok := w.band.RoomBoard(room.ID); ok {
		out["goal "+bd.GoalTitle] = bd.Changes
	}
	out["reply"] = w.repliesTo(room, bandonce.DefaultKey(id))
	return out
}

func wantBoardWrites(id string) map[string]int {
	k := bandonce.DefaultKey(id)
	return map[string]int{
		"memory " + k + ":memory:1":               1,
		"task [dedup_key:" + k + ":task:1]":       1,
		"comment [dedup_key:" + k + ":comment:1]": 1,
		"status completed":                        1,
		"room":                                    1,
		"goal refunds":                            1,
		"contact request":                         1,
		"reply":                                   1,
	}
}

// A turn that stores a memory, creates and works a task, sets the goal
// and opens a room makes each write once and costs one request per write.
func TestATurnMakesEachAgentAPIWriteOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "refund order 17")
		stop := w.start(w.config(boardHandler))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, wantBoardWrites(id), boardWrites(t, w, room, id))
		reqs := w.band.Requests()
		for ep, n := range map[fakeband.Endpoint]int{fakeband.EndpointCreateMemory: 1, fakeband.EndpointCreateTask: 1,
			fakeband.EndpointUpdateTask: 2, fakeband.EndpointPutBoard: 1, fakeband.EndpointCreateChat: 1,
			fakeband.EndpointMemories: 0, fakeband.EndpointTasks: 0, fakeband.EndpointTaskHistory: 0, fakeband.EndpointChats: 1} {
			assert.Equal(t, n, reqs[ep], "%s: a first delivery reads nothing to guard its writes", ep)
		}
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
	})
}

// A write whose answer was lost is found again by its key and not made
// again: the guard reads Band once and never repeats the request blind.
func TestAWriteWhoseAnswerWasLostIsNotMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		ep   fakeband.Endpoint
		nth  int
		read fakeband.Endpoint
	}{
		{fakeband.EndpointCreateMemory, 1, fakeband.EndpointMemories},
		{fakeband.EndpointCreateTask, 1, fakeband.EndpointTasks},
		{fakeband.EndpointUpdateTask, 2, fakeband.EndpointTaskHistory}, // the comment
		{fakeband.EndpointCreateChat, 1, fakeband.EndpointChats},
	} {
		t.Run(string(tc.ep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "refund order 17")
				w.band.Inject(fakeband.Fault{Endpoint: tc.ep, Nth: tc.nth, Kind: fakeband.LoseResponse})
				stop := w.start(w.config(boardHandler))
				runFor(10 * time.Second)
				require.NoError(t, stop())
				assert.Equal(t, wantBoardWrites(id), boardWrites(t, w, room, id))
				reqs := w.band.Requests()
				// The comment found, only the status that came with it is
				// set again: three updates, one comment.
				sent := map[fakeband.Endpoint]int{fakeband.EndpointUpdateTask: 3}[tc.ep]
				assert.Equal(t, max(sent, 1), reqs[tc.ep], "never sent again blind")
				clean := map[fakeband.Endpoint]int{fakeband.EndpointChats: 1}[tc.read] // the shell's start-up listing
				assert.Greater(t, reqs[tc.read], clean, "Band was read for the key")
				assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			})
		})
	}
}

// A crash at every request boundary of a turn with every agent-API write,
// before and after Band applied the request, then a fresh shell: each
// write is in the fake's truth once, on a forgetful and on a durable
// ledger.
func TestCrashAtEveryRequestOfATurnWithAgentAPIWrites(t *testing.T) {
	crashAtEveryRequestOfATurn(t, 13, "me, chats, next, processing, 7 writes, participants, the reply, processed", func() (bandonce.Handler, turnCheck) {
		return boardHandler, func(t *testing.T, w *world, room fakeband.Room, id string, _ bool) {
			assert.Equal(t, wantBoardWrites(id), boardWrites(t, w, room, id))
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		}
	})
}

// The writes are refused outside the turn and after a stop, and bad ones
// are refused before any request.
func TestAgentAPIWritesOutsideTheTurnOrBadAreRefused(t *testing.T) {
	var m bandonce.Message
	ctx := t.Context()
	_, err := m.StoreMemory(ctx, bandonce.Memory{})
	assert.ErrorIs(t, err, bandonce.ErrNotInTurn)
	_, err = m.CreateTask(ctx, bandonce.Task{Subject: "x"})
	assert.ErrorIs(t, err, bandonce.ErrNotInTurn)
	_, err = m.UpdateTask(ctx, "1", bandonce.TaskUpdate{Comment: "x"})
	assert.ErrorIs(t, err, bandonce.ErrNotInTurn)
	_, err = m.SetGoal(ctx, band.Goal{})
	assert.ErrorIs(t, err, bandonce.ErrNotInTurn)
	_, err = m.CreateRoom(ctx, "x")
	assert.ErrorIs(t, err, bandonce.ErrNotInTurn)

	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		w.say(room, "x")
		errs := make(chan error, 8)
		stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			_, err := m.StoreMemory(ctx, bandonce.Memory{Content: "x", System: "long_term", Type: "semantic", Segment: "user", Thought: "t"})
			errs <- err // no subject for a subject memory
			_, err = m.StoreMemory(ctx, bandonce.Memory{Content: "x", System: "long_term", Type: "semantic", Segment: "user", Thought: "t",
				Scope: "organization", Metadata: map[string]any{"dedup_key": "mine"}})
			errs <- err
			_, err = m.CreateTask(ctx, bandonce.Task{Subject: " "})
			errs <- err
			_, err = m.UpdateTask(ctx, "1", bandonce.TaskUpdate{Comment: " "})
			errs <- err
			_, err = m.CreateRoom(ctx, strings.Repeat("t", 110))
			errs <- err
			return nil, nil
		}))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		for range 5 {
			err := <-errs
			var perm *bandonce.PermanentError
			assert.ErrorAs(t, err, &perm)
		}
		reqs := w.band.Requests()
		for _, ep := range []fakeband.Endpoint{fakeband.EndpointCreateMemory, fakeband.EndpointCreateTask, fakeband.EndpointUpdateTask, fakeband.EndpointCreateChat} {
			assert.Zero(t, reqs[ep], "%s: nothing sent", ep)
		}
	})
}

// A guarded agent-API write whose POST Band applies after the client gave
// up on it (past RequestTimeout, within SettleWindow): the guard's read
// must not trust the write's absence before it settled.
func TestAnAgentAPIWriteAppliedLateIsMadeOnce(t *testing.T) {
	for _, ep := range []fakeband.Endpoint{fakeband.EndpointCreateMemory, fakeband.EndpointCreateTask,
		fakeband.EndpointCreateChat, fakeband.EndpointUpdateTask} {
		t.Run(string(ep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "refund order 17")
				nth := 1
				if ep == fakeband.EndpointUpdateTask {
					nth = 2 // the comment
				}
				w.band.Inject(fakeband.Fault{Endpoint: ep, Nth: nth, Kind: fakeband.ApplyLate, Delay: 4 * time.Second})
				cfg := w.config(boardHandler)
				cfg.RequestTimeout = 2 * time.Second // SettleWindow stays 5 s
				stop := w.start(cfg)
				runFor(time.Minute)
				require.NoError(t, stop())
				assert.Equal(t, wantBoardWrites(id), boardWrites(t, w, room, id))
			})
		})
	}
}

// The same across lives: the first life dies while Band holds the
// memory's POST; the next life's redelivery reads the memories before the
// held POST is applied and stores the memory again.
func TestAnAgentAPIWriteAppliedAfterItsSenderDiedIsMadeOnce(t *testing.T) {
	for _, ep := range []fakeband.Endpoint{fakeband.EndpointCreateMemory, fakeband.EndpointCreateTask, fakeband.EndpointCreateChat} {
		t.Run(string(ep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "refund order 17")
				w.band.Inject(fakeband.Fault{Endpoint: ep, Nth: 1, Kind: fakeband.ApplyLate, Delay: 3 * time.Second})
				killLifeAt(t, w, w.config(boardHandler), time.Second) // the POST is held when the life dies
				cfg := w.config(boardHandler)
				stop := w.start(cfg)
				runFor(time.Minute)
				require.NoError(t, stop())
				assert.Equal(t, wantBoardWrites(id), boardWrites(t, w, room, id))
				assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			})
		})
	}
}

// rememberThenReply stores a memory under the message's text as its
// natural key, then replies under it too.
func rememberThenReply(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: "asked: " + m.Body(), System: "long_term",
		Type: "episodic", Segment: "user", Thought: "to recall it", SubjectID: m.SenderID, DedupKey: m.Body()}); err != nil {
		return nil, err
	}
	return keyedByBody(ctx, m)
}

// memoryKeys counts the agent's memories in the fake's truth by their
// dedup key.
func memoryKeys(t *testing.T, w *world) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, mem := range w.band.Memories() {
		var meta map[string]any
		require.NoError(t, json.Unmarshal(mem.Metadata, &meta))
		out[fmt.Sprint(meta["dedup_key"])]++
	}
	return out
}

// oneKeyHandler names every write of its turn by the one natural key of
// its unit of work, the message's text: an event, a memory, a task, a
// comment on it, and the reply.
func oneKeyHandler(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	key := m.Body()
	if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "on it", DedupKey: key}); err != nil {
		return nil, err
	}
	if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: "asked: " + key, System: "long_term", Type: "episodic",
		Segment: "user", Thought: "to recall it", SubjectID: m.SenderID, DedupKey: key}); err != nil {
		return nil, err
	}
	task, err := m.CreateTask(ctx, bandonce.Task{Subject: "handle " + key, DedupKey: key})
	if err != nil {
		return nil, err
	}
	if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed", Comment: "done", DedupKey: key}); err != nil {
		return nil, err
	}
	return &bandonce.Reply{Content: "done: " + key, Mentions: []string{m.SenderID}, DedupKey: key}, nil
}

// oneKeyWrites counts the writes of oneKeyHandler's turn for key, by kind.
func oneKeyWrites(t *testing.T, w *world, room fakeband.Room, key string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for key, n := range memoryKeys(t, w) {
		out["memory "+key] = n
	}
	for _, task := range w.band.Tasks(room.ID) {
		out["task "+task.Detail]++
		for _, c := range task.Comments {
			out["comment "+strings.Split(c.Text, "\n")[1]]++
		}
	}
	for _, e := range w.band.Events() {
		if e.Kind == fakeband.EventChatEvent {
			out["event"]++
		}
	}
	out["reply"] = w.repliesTo(room, key)
	return out
}

// One natural key names an event, a memory, a task, a comment and the
// reply: each
// kind of write is guarded apart, so each is made once and none is taken
// for another already made. Before they were, the memory's record made the
// task, the comment and the reply "already done": the person was never
// answered. The same across a crash at every request of the turn.
func TestOneKeyNamesAWriteOfEachKindApart(t *testing.T) {
	const key = "order-17"
	want := map[string]int{"event": 1, "memory " + key: 1, "task [dedup_key:" + key + "]": 1, "comment [dedup_key:" + key + "]": 1, "reply": 1}
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, key)
		stop := w.start(w.config(oneKeyHandler))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, want, oneKeyWrites(t, w, room, key))
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
	})
	crashAtEveryRequestOfATurnSaying(t, key, 9, "me, chats, next, processing, the event, 4 writes, the reply, processed", func() (bandonce.Handler, turnCheck) {
		return oneKeyHandler, func(t *testing.T, w *world, room fakeband.Room, id string, _ bool) {
			assert.Equal(t, want, oneKeyWrites(t, w, room, key))
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		}
	})
}

// diesAfterThenRedelivered runs work as a turn that dies after it in the
// first life, before its reply, then lets a second life redeliver the
// message, run work again and answer "ok".
func diesAfterThenRedelivered(t *testing.T, w *world, work func(ctx context.Context, m *bandonce.Message) error) {
	t.Helper()
	var lives atomic.Int32
	h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := work(ctx, m); err != nil {
			return nil, err
		}
		if lives.Load() == 0 {
			<-ctx.Done() // the process dies here
			return nil, ctx.Err()
		}
		return &bandonce.Reply{Content: "ok", Mentions: []string{m.SenderID}}, nil
	}
	killLifeAt(t, w, w.config(h), 5*time.Second)
	lives.Add(1)
	stop := w.start(w.config(h))
	runFor(2 * time.Minute)
	require.NoError(t, stop())
}

// A turn that edits the detail of the task it created keeps the task's
// marker in the new detail: a redelivery after a crash finds the task and
// does not create it again.
func TestATaskWhoseDetailTheTurnEditsIsFoundAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "refund")
		diesAfterThenRedelivered(t, w, func(ctx context.Context, m *bandonce.Message) error {
			task, err := m.CreateTask(ctx, bandonce.Task{Subject: "refund", Detail: "draft", DedupKey: "refund-17"})
			if err == nil {
				_, err = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Detail: "amount: 17 EUR"})
			}
			return err
		})
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		tasks := w.band.Tasks(room.ID)
		require.Len(t, tasks, 1, "one task")
		assert.Equal(t, "amount: 17 EUR\n[dedup_key:refund-17]", tasks[0].Detail)
	})
}

// A task's detail and a comment may be as long as Band takes once the
// longest marker is on them; a character more is refused before any
// request, not by Band after one.
func TestTaskTextsLeaveRoomForTheirMarker(t *testing.T) {
	const most = 16384 - len("\n[dedup_key:]") - 256
	key := strings.Repeat("k", 256)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "x")
		var errs []error
		stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			task, err := m.CreateTask(ctx, bandonce.Task{Subject: "s", Detail: strings.Repeat("d", most), DedupKey: key})
			errs = append(errs, err)
			_, err = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Comment: strings.Repeat("c", most), DedupKey: key})
			errs = append(errs, err)
			_, err = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Detail: strings.Repeat("e", most)})
			errs = append(errs, err)
			_, err = m.CreateTask(ctx, bandonce.Task{Subject: "s", Detail: strings.Repeat("d", most+1)})
			errs = append(errs, err)
			_, err = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Comment: strings.Repeat("c", most+1)})
			errs = append(errs, err)
			_, err = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Detail: strings.Repeat("e", most+1)})
			errs = append(errs, err)
			return nil, nil
		}))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		require.Len(t, errs, 6)
		for i, err := range errs[:3] {
			assert.NoError(t, err, "text %d at the bound", i)
		}
		for i, err := range errs[3:] {
			var permanent *bandonce.PermanentError
			assert.ErrorAs(t, err, &permanent, "text %d past the bound", i)
		}
		reqs := w.band.Requests()
		assert.Equal(t, 1, reqs[fakeband.EndpointCreateTask], "the one past the bound is not sent")
		assert.Equal(t, 2, reqs[fakeband.EndpointUpdateTask])
	})
}

// A turn that completes a task, then archives it, and dies before its
// reply: the redelivery sets the completed state again, which Band refuses
// on an archived task. That refusal is the turn's own later update, not a
// failure: the redelivery goes on, archives nothing twice, and answers.
func TestARedeliveryPastATaskItsTurnArchivedAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "x")
		diesAfterThenRedelivered(t, w, func(ctx context.Context, m *bandonce.Message) error {
			task, err := m.CreateTask(ctx, bandonce.Task{Subject: "refund"})
			if err != nil {
				return err
			}
			for _, u := range []bandonce.TaskUpdate{{Status: "in_progress"}, {Status: "completed", Comment: "done"}, {State: "archived"}} {
				if _, err := m.UpdateTask(ctx, task.ID, u); err != nil {
					return err
				}
			}
			return nil
		})
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		tasks := w.band.Tasks(room.ID)
		require.Len(t, tasks, 1)
		assert.Equal(t, "archived", tasks[0].State)
		assert.Len(t, tasks[0].Comments, 1)
	})
}

// On a first delivery a task that takes no work is the handler's to know
// of: the update's refusal is returned.
func TestAnUpdateOfAnArchivedTaskIsRefusedOnAFirstDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "x")
		var got error
		stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			task, err := m.CreateTask(ctx, bandonce.Task{Subject: "refund"})
			if err != nil {
				return nil, err
			}
			if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{State: "archived"}); err != nil {
				return nil, err
			}
			_, got = m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed"})
			return &bandonce.Reply{Content: "ok", Mentions: []string{m.SenderID}}, nil
		}))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		var apiErr *bandonce.APIError
		require.ErrorAs(t, got, &apiErr)
		assert.Equal(t, "task_not_active", apiErr.Code)
	})
}

// A memory's key is the agent's: a turn in a second room that stores a
// memory under a key the first room used gets the first memory, and Band
// holds one.
func TestAMemoryKeyIsTheAgentsAcrossRooms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		w.say(w.rooms[0], "prefs")
		var got []string
		stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			mem, err := m.StoreMemory(ctx, bandonce.Memory{Content: "asked in " + m.RoomID, System: "long_term", Type: "semantic",
				Segment: "user", Thought: "t", SubjectID: m.SenderID, DedupKey: m.Body()})
			if err != nil {
				return nil, err
			}
			got = append(got, mem.Content)
			return &bandonce.Reply{Content: "stored", Mentions: []string{m.SenderID}}, nil
		}))
		runFor(10 * time.Second)
		w.say(w.rooms[1], "prefs")
		runFor(10 * time.Second)
		require.NoError(t, stop())
		require.Len(t, w.band.Memories(), 1)
		first := "asked in " + w.rooms[0].ID
		assert.Equal(t, []string{first, first}, got)
	})
}

// interruptAnUnguardedWrite runs one turn whose handler makes the write,
// with a context the interrupt does not cancel, while fault holds it at
// Band; once the write's first request has arrived, the room is
// interrupted. It returns the write's error.
func interruptAnUnguardedWrite(t *testing.T, fault fakeband.Fault, write func(ctx context.Context, m *bandonce.Message, agentID string) error) (*rig, error) {
	r := newRig(t, 1, 0)
	room := r.rooms[0]
	cfg := r.config()
	var werr error
	done := make(chan struct{})
	cfg.Handler = func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		defer close(done)
		werr = write(context.WithoutCancel(ctx), m, r.agent.ID)
		return nil, werr
	}
	r.band.Inject(fault)
	stop := startOnce(r.world, cfg)
	time.Sleep(time.Second) // the socket is up
	r.say(room, "go on")
	time.Sleep(2 * time.Second) // the write's first request has arrived
	synctest.Wait()
	require.Equal(t, 1, r.band.Requests()[fault.Endpoint])
	require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
	<-done
	require.NoError(t, stop())
	return r, werr
}

// An unguarded agent-API write (here SetGoal) leaves its retries to the
// HTTP layer, which retries a 503 after its Retry-After: each try asks
// the cycle's gate as it leaves (wire.WithStartCheck), as m.Send does, so
// an interrupt in that wait stops the retry, whatever context the
// handler passed.
func TestAnUnguardedWriteIsNotRetriedAfterAnInterrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		title := "ship it"
		r, err := interruptAnUnguardedWrite(t,
			fakeband.Fault{Endpoint: fakeband.EndpointPutBoard, Nth: 1, Kind: fakeband.FailBefore, Status: 503, RetryAfter: "3"},
			func(ctx context.Context, m *bandonce.Message, _ string) error {
				_, err := m.SetGoal(ctx, band.Goal{Title: &title})
				return err
			})
		assert.Equal(t, 1, r.band.Requests()[fakeband.EndpointPutBoard], "no PUT after the interrupt")
		assert.ErrorIs(t, err, bandonce.ErrInterrupted)
	})
}

// An unguarded write whose follow-up read the turn's gate withheld (band's
// AddParticipant answers a 409/422, "already a participant", by reading
// the room's participants) returns the signal's cause, not Band's 422.
func TestAnUnguardedWriteCutByAnInterruptReturnsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, err := interruptAnUnguardedWrite(t,
			fakeband.Fault{Endpoint: fakeband.EndpointAddParticipant, Nth: 1, Kind: fakeband.Delay, Delay: 5 * time.Second},
			func(ctx context.Context, m *bandonce.Message, agentID string) error {
				// The agent itself: Band answers 422, already a participant.
				_, err := m.AddParticipant(ctx, agentID, "")
				return err
			})
		// Either the call found the agent in the room (nil) or it gives
		// the interrupt as its cause; never Band's 422.
		if err != nil {
			assert.ErrorIs(t, err, bandonce.ErrInterrupted, "an interrupt reached the turn: the call returns its cause")
		}
	})
}
