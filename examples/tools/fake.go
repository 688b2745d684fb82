package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/examplekit"
)

// runFake plays one refund request on the in-process fake Band, with a
// fake payment API, and prints the room (the messages and the events), its
// board, the rooms and contacts the agent touched, who is in the room
// and the agent's memories.
func runFake(ctx context.Context, out io.Writer, logger *slog.Logger) error {
	stage := examplekit.NewStage(1, "refunds", "ada", "bea")
	defer stage.Close()
	past, err := seedPast(ctx, stage)
	if err != nil {
		return err
	}
	handler := Handler(&examplekit.PaymentsClient{BaseURL: stage.PaymentsURL}, past.Team)
	if err := stage.Play(ctx, handler, logger, "please refund order-17", 10*time.Second); err != nil {
		return err
	}
	fb, name := stage.Band, stage.Names
	t := stage.Transcript(out, 8)
	t.Room()
	t.Board()
	if bd, ok := fb.RoomBoard(stage.Room.ID); ok {
		t.Line("goal", "%s: %s", bd.GoalTitle, bd.GoalSummary)
	}
	for _, r := range fb.CreatedRooms() {
		t.Line("room", "%s opened %q", name(r.OwnerID), r.Title)
	}
	var members []string
	for _, p := range fb.Members(stage.Room.ID) {
		members = append(members, p.Name+" ("+p.Role+")")
	}
	t.Line("room", "%s: %s", stage.Room.Title, strings.Join(members, ", "))
	for _, e := range fb.Events() {
		switch {
		case e.Kind == fakeband.EventContactRequest && name(e.Detail) != "":
			t.Line("contact", "%s asked %s", name(e.AgentID), name(e.Detail))
		case e.Kind == fakeband.EventContactRequest:
			t.Line("contact", "%s answered a request: %s", name(e.AgentID), strings.Fields(e.Detail)[1])
		case e.Kind == fakeband.EventContactRemoved && e.AgentID == stage.Agent.ID:
			t.Line("contact", "%s removed %s", name(e.AgentID), name(e.Detail))
		}
	}
	for _, mem := range fb.Memories() {
		t.Line("memory", "about %s [%s]: %s", name(mem.SubjectID), mem.Status, mem.Content)
	}
	t.Refunds()
	return nil
}

// seedPast gives the agent a past: two memories about ada's order-17 from
// an earlier conversation (a fact the refund will prove wrong and a note
// the refund makes stale), a contact it no longer works with (billing-v1),
// still in the room, and a pending contact request from the agent that
// replaced it (billing). ada, the room's owner, made the agent an admin of
// the room, so that it may take billing-v1 out.
func seedPast(ctx context.Context, stage *examplekit.Stage) (past, error) {
	fb, agent, ada, room := stage.Band, stage.Agent, stage.Humans[0], stage.Room
	old, next := fb.AddAgent("billing-v1"), fb.AddAgent("billing")
	stage.Name(old.ID, old.Name)
	stage.Name(next.ID, next.Name)
	if err := fb.AddContact(agent.ID, old.ID); err != nil {
		return past{}, err
	}
	// The fake changes a role only by a rejoin.
	if err := fb.RemoveParticipant(room.ID, agent.ID); err != nil {
		return past{}, err
	}
	if err := fb.AddParticipantAs(room.ID, agent.ID, fakeband.RoleAdmin); err != nil {
		return past{}, err
	}
	if err := fb.AddParticipant(room.ID, old.ID); err != nil {
		return past{}, err
	}
	client := func(key string) (*band.Client, error) {
		return band.New(band.Config{APIKey: key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient()})
	}
	asker, err := client(next.Key)
	if err != nil {
		return past{}, err
	}
	if _, err := asker.AddContact(ctx, "@"+agent.Handle, "I took over refunds from billing-v1: add me to tell me of them."); err != nil {
		return past{}, err
	}
	me, err := client(agent.Key)
	if err != nil {
		return past{}, err
	}
	for _, mem := range []band.NewMemory{
		{Content: "order-17 may not be refunded: it was delivered intact.", Type: "semantic",
			Thought: "The carrier reported the delivery."},
		{Content: "ada waits for a decision on order-17; chase the carrier.", Type: "procedural",
			Thought: "To follow the order up."},
	} {
		mem.System, mem.Segment, mem.SubjectID = "long_term", "user", ada.ID
		mem.Metadata = map[string]any{"order": "order-17"}
		if _, err := me.CreateMemory(ctx, mem); err != nil {
			return past{}, err
		}
	}
	return past{Team: Team{Billing: "@" + next.Handle, Retired: "@" + old.Handle}, billing: next, retired: old}, nil
}

// past is what seedPast made: the Team the handler works with, and its
// two agents.
type past struct {
	Team
	billing, retired fakeband.Agent
}
