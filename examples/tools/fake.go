package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
)

// runFake plays one refund request on the in-process fake Band, with a
// fake payment API, and prints the room (the messages and the events), its
// board and the memory the agent stored.
func runFake(ctx context.Context, out io.Writer, logger *slog.Logger) error {
	fb := fakeband.New(fakeband.Options{Seed: 1})
	defer fb.Close()
	agent := fb.AddAgent("refunds")
	ada, bea := fb.AddHuman("ada"), fb.AddHuman("bea")
	room := fb.AddRoom("support", ada, agent.ID, bea.ID)
	past, err := seedPast(ctx, fb, agent, ada)
	if err != nil {
		return err
	}
	payments := NewPaymentsServer()
	api := httptest.NewServer(payments)
	defer api.Close()

	shell, err := bandonce.New(bandonce.Config{
		APIKey:     agent.Key,
		BaseURL:    fb.BaseURL(),
		SocketURL:  fb.SocketURL(),
		HTTPClient: fb.HTTPClient(),
		Handler:    Handler(&PaymentsClient{BaseURL: api.URL, HTTPClient: api.Client()}, past.Team),
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- shell.Run(ctx) }()

	msg, err := fb.Say(room.ID, ada.ID, "please refund order-17", agent.ID)
	if err == nil {
		err = waitProcessed(ctx, fb, agent.ID, msg)
	}
	cancel()
	if runErr := <-done; runErr != nil {
		return runErr
	}
	if err != nil {
		return err
	}
	names := map[string]string{agent.ID: agent.Name, ada.ID: ada.Name, bea.ID: bea.Name}
	type line struct {
		seq  int
		text string
	}
	var lines []line
	for _, p := range fb.Posts(room.ID) {
		to := ""
		for _, id := range p.Mentions {
			to += "@" + names[id] + " "
		}
		lines = append(lines, line{p.Seq, fmt.Sprintf("%-8s %s%s", names[p.SenderID]+":", to, bandonce.StripMentions(firstLine(p.Content)))})
	}
	for _, e := range fb.ChatEvents(room.ID) {
		lines = append(lines, line{e.Seq, fmt.Sprintf("%-8s [%s] %s", names[e.SenderID]+":", e.MessageType, e.Content)})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].seq < lines[j].seq })
	for _, l := range lines {
		fmt.Fprintln(out, l.text)
	}
	for _, t := range fb.Tasks(room.ID) {
		status := "pending"
		for _, a := range t.Assignments {
			status = a.Status
		}
		fmt.Fprintf(out, "board:   #%d %s [%s]\n", t.Number, t.Subject, status)
		for _, c := range t.Comments {
			fmt.Fprintf(out, "         %s: %s\n", names[c.AuthorID], firstLine(c.Text))
		}
	}
	if bd, ok := fb.RoomBoard(room.ID); ok {
		fmt.Fprintf(out, "goal:    %s: %s\n", bd.GoalTitle, bd.GoalSummary)
	}
	for _, r := range fb.CreatedRooms() {
		fmt.Fprintf(out, "room:    %s opened %q\n", names[r.OwnerID], r.Title)
	}
	names[past.billing.ID], names[past.retired.ID] = past.billing.Name, past.retired.Name
	for _, e := range fb.Events() {
		switch {
		case e.Kind == fakeband.EventContactRequest && names[e.Detail] != "":
			fmt.Fprintf(out, "contact: %s asked %s\n", names[e.AgentID], names[e.Detail])
		case e.Kind == fakeband.EventContactRequest:
			fmt.Fprintf(out, "contact: %s answered a request: %s\n", names[e.AgentID], strings.Fields(e.Detail)[1])
		case e.Kind == fakeband.EventContactRemoved && e.AgentID == agent.ID:
			fmt.Fprintf(out, "contact: %s removed %s\n", names[e.AgentID], names[e.Detail])
		}
	}
	for _, mem := range fb.Memories() {
		fmt.Fprintf(out, "memory:  about %s [%s]: %s\n", names[mem.SubjectID], mem.Status, mem.Content)
	}
	for order, n := range payments.Refunds() {
		fmt.Fprintf(out, "payments: %s refunded %d time(s)\n", order, n)
	}
	return nil
}

// seedPast gives the agent a past: two memories about ada's order-17 from
// an earlier conversation (a fact the refund will prove wrong and a note
// the refund makes stale), a contact it no longer works with (billing-v1)
// and a pending contact request from the agent that replaced it
// (billing).
func seedPast(ctx context.Context, fb *fakeband.Band, agent fakeband.Agent, ada fakeband.Human) (past, error) {
	old, next := fb.AddAgent("billing-v1"), fb.AddAgent("billing")
	if err := fb.AddContact(agent.ID, old.ID); err != nil {
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

// waitProcessed polls the fake's ground truth until the message is
// processed, or gives up after ten seconds.
func waitProcessed(ctx context.Context, fb *fakeband.Band, agentID, msgID string) error {
	deadline := time.Now().Add(10 * time.Second)
	for fb.Status(agentID, msgID) != fakeband.StatusProcessed {
		if time.Now().After(deadline) {
			return fmt.Errorf("the message was not processed in 10s (status %q)", fb.Status(agentID, msgID))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// firstLine drops the dedup marker line the shell appends to messages.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
