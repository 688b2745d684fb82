package band_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
)

func fakeClient(t *testing.T) (*fakeband.Band, fakeband.Agent, fakeband.Room, *band.Client) {
	t.Helper()
	fb := fakeband.New(fakeband.Options{Seed: 3})
	t.Cleanup(func() { _ = fb.Close() })
	agent := fb.AddAgent("helper")
	ada := fb.AddHuman("ada")
	room := fb.AddRoom("support", ada, agent.ID)
	c, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), Retry: band.RetryPolicy{Seed: 1}})
	require.NoError(t, err)
	return fb, agent, room, c
}

// A memory stored is listed, read, superseded and archived with the
// document's fields, its metadata kept as sent.
func TestMemoriesAreStoredListedAndRetired(t *testing.T) {
	fb, agent, room, c := fakeClient(t)
	ctx := t.Context()
	ada := fb.Members(room.ID)[0].ID
	m, err := c.CreateMemory(ctx, band.NewMemory{Content: "ada likes short answers", System: "long_term", Type: "semantic",
		Segment: "user", Thought: "she said so", Scope: "subject", SubjectID: ada, Metadata: map[string]any{"dedup_key": "k1"}})
	require.NoError(t, err)
	assert.Equal(t, agent.ID, m.SourceAgentID)
	assert.Equal(t, "k1", m.Metadata["dedup_key"])
	assert.Equal(t, "active", m.Status)

	for i := range 120 {
		_, err := c.CreateMemory(ctx, band.NewMemory{Content: "fact " + strconv.Itoa(i), System: "working", Type: "episodic",
			Segment: "agent", Thought: "t", Scope: "organization"})
		require.NoError(t, err)
	}
	all, err := c.Memories(ctx, band.MemoryFilter{Scope: "all"})
	require.NoError(t, err)
	assert.Len(t, all, 121, "every cursor page read")
	mine, err := c.Memories(ctx, band.MemoryFilter{SubjectID: ada})
	require.NoError(t, err)
	require.Len(t, mine, 1)
	assert.Equal(t, m.ID, mine[0].ID)

	got, err := c.Memory(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m.Content, got.Content)
	s, err := c.SupersedeMemory(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "superseded", s.Status)
	a, err := c.ArchiveMemory(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "archived", a.Status)
	_, err = c.Memory(ctx, "00000000-0000-4000-8000-000000000000")
	var apiErr *band.APIError
	require.True(t, errors.As(err, &apiErr))
	assert.Equal(t, http.StatusNotFound, apiErr.Status)
}

// A task is created, joined, commented on and read back with its history;
// the board's goal is set.
func TestTasksAndTheBoardRoundTrip(t *testing.T) {
	fb, agent, room, c := fakeClient(t)
	ctx := t.Context()
	task, err := c.CreateTask(ctx, room.ID, band.NewTask{Subject: "refund order-17", Detail: "ada asked"})
	require.NoError(t, err)
	assert.Equal(t, 1, task.Number)
	assert.Equal(t, agent.ID, task.CreatedBy.ID)
	u, err := c.UpdateTask(ctx, room.ID, task.ID, band.TaskUpdate{Status: "in_progress", ActiveForm: "refunding", Comment: "on it"})
	require.NoError(t, err)
	require.Len(t, u.Assignments, 1)
	assert.Equal(t, "in_progress", u.Assignments[0].Status)
	assert.Equal(t, "in_progress", u.OverallStatus)
	byNumber, err := c.Task(ctx, room.ID, "1")
	require.NoError(t, err)
	assert.Equal(t, task.ID, byNumber.ID)
	for i := range 130 {
		_, err := c.UpdateTask(ctx, room.ID, task.ID, band.TaskUpdate{Comment: "note " + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	h, err := c.TaskHistory(ctx, room.ID, task.ID)
	require.NoError(t, err)
	require.Len(t, h, 1+1+131, "created, status_changed, every comment: every cursor page read")
	assert.Equal(t, "created", h[0].Event)
	assert.Equal(t, "on it", h[2].Payload["text"])
	tasks, err := c.Tasks(ctx, room.ID, "all")
	require.NoError(t, err)
	assert.Len(t, tasks, 1)

	title := "refunds"
	b, err := c.SetGoal(ctx, room.ID, band.Goal{Title: &title})
	require.NoError(t, err)
	assert.Equal(t, "refunds", b.GoalTitle)
	b, err = c.Board(ctx, room.ID)
	require.NoError(t, err)
	assert.Equal(t, "refunds", b.GoalTitle)
	_, ok := fb.RoomBoard(room.ID)
	assert.True(t, ok)
}

// Contacts: a request sent twice is one request, its approval makes a
// contact, and removing it twice is one removal; answering an answered
// request is no error.
func TestContactWritesRepeatedHaveTheEffectOfOne(t *testing.T) {
	fb, agent, _, c := fakeClient(t)
	ctx := t.Context()
	peer := fb.AddAgent("peer")
	pc, err := band.New(band.Config{APIKey: peer.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), Retry: band.RetryPolicy{Seed: 2}})
	require.NoError(t, err)
	first, err := c.AddContact(ctx, "@"+peer.Handle, "hello")
	require.NoError(t, err)
	assert.Equal(t, "pending", first.Status)
	again, err := c.AddContact(ctx, peer.Handle, "hello")
	require.NoError(t, err)
	assert.Equal(t, first.ID, again.ID, "the pending request is found again")
	received, _, err := pc.ContactRequests(ctx, "")
	require.NoError(t, err)
	require.Len(t, received, 1, "one request")
	ok, err := pc.RespondToContactRequest(ctx, band.ContactApprove, agent.Handle)
	require.NoError(t, err)
	assert.Equal(t, "approved", ok.Status)
	answered, err := pc.RespondToContactRequest(ctx, band.ContactApprove, agent.Handle)
	require.NoError(t, err)
	assert.Equal(t, band.StatusAnswered, answered.Status)
	contacts, err := c.Contacts(ctx)
	require.NoError(t, err)
	require.Len(t, contacts, 1)
	assert.Equal(t, peer.Handle, contacts[0].Handle)
	already, err := c.AddContact(ctx, peer.Handle, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", already.Status, "a contact already")
	require.NoError(t, c.RemoveContact(ctx, peer.Handle))
	require.NoError(t, c.RemoveContact(ctx, peer.Handle), "removing it again is no error")
	contacts, err = c.Contacts(ctx)
	require.NoError(t, err)
	assert.Empty(t, contacts)
}

// A room is read and renamed, a rename repeated changes nothing, and the
// working indicator is set and cleared.
func TestARoomIsReadRenamedAndReportedWorkingIn(t *testing.T) {
	fb, agent, room, c := fakeClient(t)
	ctx := t.Context()
	mine, err := c.CreateRoom(ctx, "mine")
	require.NoError(t, err)
	got, err := c.Room(ctx, mine.ID)
	require.NoError(t, err)
	assert.Equal(t, "mine", got.Title)
	for range 2 {
		renamed, err := c.RenameRoom(ctx, mine.ID, "renamed")
		require.NoError(t, err)
		assert.Equal(t, "renamed", renamed.Title)
	}
	renames := 0
	for _, e := range fb.Events() {
		if e.Kind == fakeband.EventRename {
			renames++
		}
	}
	assert.Equal(t, 1, renames)
	_, err = c.RenameRoom(ctx, room.ID, "not mine")
	var apiErr *band.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusForbidden, apiErr.Status)
	require.NoError(t, c.Activity(ctx, room.ID, true))
	assert.True(t, fb.Working(agent.ID, room.ID))
	require.NoError(t, c.Activity(ctx, room.ID, false))
	assert.False(t, fb.Working(agent.ID, room.ID))
}

// A board or a memory store whose pages are over the client's cap is read
// whole in smaller pages, not refused: a guard that must find a task or a
// memory by its key can always read the listing.
func TestListingsOverTheCapAreReadInSmallerPages(t *testing.T) {
	fb, agent, room, _ := fakeClient(t)
	ctx := t.Context()
	c, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), MaxResponseBytes: 20_000})
	require.NoError(t, err)
	text := strings.Repeat("z", 3000) // a page of 100 tasks or 50 memories is far past 20 KB
	for i := range 30 {
		_, err := c.CreateTask(ctx, room.ID, band.NewTask{Subject: "task " + strconv.Itoa(i), Detail: text})
		require.NoError(t, err)
		_, err = c.CreateMemory(ctx, band.NewMemory{Content: text, System: "working", Type: "episodic",
			Segment: "agent", Thought: "t", Scope: "organization"})
		require.NoError(t, err)
	}
	tasks, err := c.Tasks(ctx, room.ID, "all")
	require.NoError(t, err)
	assert.Len(t, tasks, 30)
	memories, err := c.Memories(ctx, band.MemoryFilter{Scope: "all"})
	require.NoError(t, err)
	assert.Len(t, memories, 30)

	tiny, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), MaxResponseBytes: 1000})
	require.NoError(t, err)
	_, err = tiny.Tasks(ctx, room.ID, "all")
	require.ErrorIs(t, err, band.ErrTooLarge, "one task past the cap cannot be read")
}
