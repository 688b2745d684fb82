package fakeband_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

func TestLastEventIsZeroBeforeAnyChange(t *testing.T) {
	b := fakeband.New(fakeband.Options{})
	assert.Equal(t, fakeband.Event{}, b.LastEvent())
	b.AddRoom("r", b.AddHuman("ada"))
	events := b.Events()
	require.NotEmpty(t, events)
	assert.Equal(t, events[len(events)-1], b.LastEvent())
}

func TestGroundTruthRecordsWhatWasApplied(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	f.mark(t, msg, "processing", nil)
	f.mark(t, msg, "processed", nil) // applied
	f.mark(t, msg, "processed", nil) // refused: not a mark
	f.mark(t, msg, "failed", map[string]any{"error": "x"})

	marks := f.b.Marks(f.bot.ID, msg)
	require.Len(t, marks, 2)
	assert.Equal(t, "processing", marks[0].Kind)
	assert.Equal(t, "processed", marks[1].Kind)
	assert.Equal(t, 1, marks[1].Attempt)
	assert.Equal(t, f.room.ID, marks[1].RoomID)
	assert.Less(t, marks[0].Seq, marks[1].Seq)
	assert.Equal(t, "processed", f.b.Status(f.bot.ID, msg))
	assert.Equal(t, "", f.b.Status(f.bot.ID, "nope"))

	var kinds []string
	for _, e := range f.b.Events() {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []string{"room", "join", "join", "post", "mark", "mark"}, kinds)
	events := f.b.Events()
	assert.Equal(t, fakeband.Event{Seq: 4, Kind: "post", AgentID: f.alice.ID, RoomID: f.room.ID, MessageID: msg, Detail: "User"}, events[3])
	assert.Equal(t, marks[1].Seq, events[5].Seq)
	assert.Equal(t, events[len(events)-1], f.b.LastEvent(), "LastEvent is the last of Events")
	assert.Equal(t, events[3].Seq, f.b.Posts(f.room.ID)[0].Seq)

	assert.Equal(t, map[fakeband.Endpoint]int{
		fakeband.EndpointProcessing: 1, fakeband.EndpointProcessed: 2, fakeband.EndpointFailed: 1,
	}, f.b.Requests())
}

func TestFailedMarkKeepsTheReason(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "work")
	f.mark(t, msg, "processing", nil)
	f.mark(t, msg, "failed", map[string]any{"error": "handler blew up"})
	marks := f.b.Marks(f.bot.ID, msg)
	require.Len(t, marks, 2)
	assert.Equal(t, fakeband.Mark{Seq: marks[1].Seq, AgentID: f.bot.ID, RoomID: f.room.ID, MessageID: msg,
		Kind: "failed", Attempt: 1, Error: "handler blew up"}, marks[1])
	assert.Equal(t, "failed", f.b.Status(f.bot.ID, msg))
}

func TestTruthIsACopy(t *testing.T) {
	f := newFixture(t)
	f.say(t, "work")
	posts := f.b.Posts(f.room.ID)
	posts[0].Mentions[0] = "changed"
	posts[0].Content = "changed"
	assert.Equal(t, f.bot.ID, f.b.Posts(f.room.ID)[0].Mentions[0])
}

// script drives a Band through a fixed sequence and returns what it saw.
func script(t *testing.T, seed int64) ([]fakeband.Event, []fakeband.Post, fakeband.Agent) {
	t.Helper()
	b := fakeband.New(fakeband.Options{Seed: seed})
	defer b.Close()
	alice := b.AddHuman("Alice")
	bot := b.AddAgent("Bot")
	room := b.AddRoom("r", alice, bot.ID)
	for _, s := range []string{"a", "b", "c"} {
		_, err := b.Say(room.ID, alice.ID, s, bot.ID)
		require.NoError(t, err)
	}
	return b.Events(), b.Posts(room.ID), bot
}

func TestSameSeedSameIDs(t *testing.T) {
	e1, p1, a1 := script(t, 7)
	e2, p2, a2 := script(t, 7)
	assert.Equal(t, e1, e2)
	assert.Equal(t, p1, p2)
	assert.Equal(t, a1, a2)
	_, p3, a3 := script(t, 8)
	assert.NotEqual(t, a1.ID, a3.ID)
	assert.NotEqual(t, a1.Key, a3.Key)
	assert.NotEqual(t, p1[0].ID, p3[0].ID)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$`, a1.ID)
	assert.Regexp(t, `^band_a_[0-9a-f]+$`, a1.Key)
}

func TestDefaultClockStepsOneSecondPerReading(t *testing.T) {
	f := newFixture(t)
	f.say(t, "one")
	f.say(t, "two")
	var at []time.Time
	for _, it := range f.do(t, http.MethodGet, f.chat("/context"), f.bot.Key, nil).list(t) {
		ts, err := time.Parse(time.RFC3339Nano, it.(map[string]any)["inserted_at"].(string))
		require.NoError(t, err)
		at = append(at, ts)
	}
	require.Len(t, at, 2)
	assert.True(t, at[0].After(fakeband.DefaultStart))
	assert.Equal(t, time.Second, at[1].Sub(at[0]))
}

func TestInjectedClockStampsMessages(t *testing.T) {
	fixed := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	b := fakeband.New(fakeband.Options{Now: func() time.Time { return fixed }})
	defer b.Close()
	alice, bot := b.AddHuman("Alice"), b.AddAgent("Bot")
	room := b.AddRoom("r", alice, bot.ID)
	_, err := b.Say(room.ID, alice.ID, "hi", bot.ID)
	require.NoError(t, err)
	f := &fixture{b: b, c: b.HTTPClient(), alice: alice, bot: bot, room: room}
	assert.Equal(t, "2030-05-06T07:08:09Z", f.do(t, http.MethodGet, f.chat("/messages/next"), bot.Key, nil).data(t)["inserted_at"])
}

func TestGoMethodsRefuseLikeTheAPI(t *testing.T) {
	f := newFixture(t)
	outsider := f.b.AddHuman("Outsider")
	var apiErr *fakeband.Error

	assert.ErrorIs(t, f.b.AddParticipant("nope", f.bot.ID), fakeband.ErrNotFound)
	assert.ErrorIs(t, f.b.AddParticipant(f.room.ID, "nope"), fakeband.ErrNotFound)
	assert.NoError(t, f.b.AddParticipant(f.room.ID, f.bot.ID), "adding a member again is a no-op")
	assert.ErrorIs(t, f.b.RemoveParticipant(f.room.ID, outsider.ID), fakeband.ErrNotFound)
	assert.ErrorIs(t, f.b.RemoveParticipant("nope", f.bot.ID), fakeband.ErrNotFound)

	_, err := f.b.Say(f.room.ID, "nope", "hi", f.bot.ID)
	assert.ErrorIs(t, err, fakeband.ErrNotFound)
	_, err = f.b.Say(f.room.ID, outsider.ID, "hi", f.bot.ID)
	assert.ErrorIs(t, err, fakeband.ErrNotFound, "a non-member cannot post")
	_, err = f.b.Say(f.room.ID, f.alice.ID, "hi")
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, "mentions_required", apiErr.Code)
	assert.Equal(t, http.StatusUnprocessableEntity, apiErr.Status)
	assert.NotEmpty(t, apiErr.Details)
	_, err = f.b.Say(f.room.ID, f.alice.ID, " ", f.bot.ID)
	assert.ErrorIs(t, err, fakeband.ErrValidation)
	assert.False(t, errors.Is(err, fakeband.ErrNotFound))
	assert.Empty(t, f.b.Posts(f.room.ID))
}

func TestAddRoomSkipsUnknownParticipants(t *testing.T) {
	f := newFixture(t)
	room := f.b.AddRoom("partial", f.alice, "nope", f.bot.ID)
	_, err := f.b.Say(room.ID, f.alice.ID, "hi", f.bot.ID)
	assert.NoError(t, err)
}

func TestHandlesAreSlugsAndUnique(t *testing.T) {
	b := fakeband.New(fakeband.Options{})
	defer b.Close()
	assert.Equal(t, "owner", b.Owner().Handle)
	assert.Equal(t, "owner/bot", b.AddAgent("Bot").Handle)
	assert.Equal(t, "owner/bot-2", b.AddAgent("bot").Handle)
	assert.Equal(t, "owner-2", b.AddHuman("Owner").Handle)
	assert.Equal(t, "ünïcode-bot", b.AddHuman("  Ünïcode   Bot!! ").Handle)
	assert.Equal(t, "anon", b.AddHuman("!!!").Handle)
}
