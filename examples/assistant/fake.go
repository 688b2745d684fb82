package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/anthropicmodel"
	"github.com/band-once/bandonce/agentloop/fakemodel"
	"github.com/band-once/bandonce/fakeband"
)

// Script is the model's side of a refund of order-17, for the fake model
// server: four model calls, the first three asking for tools.
func Script() []agentloop.Response {
	call := func(name, args string) agentloop.ToolCall {
		return agentloop.ToolCall{Name: name, Arguments: json.RawMessage(args)}
	}
	return []agentloop.Response{
		{Text: "Let me look the order up.", ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolSendEvent, `{"type":"thought","content":"ada asks for a refund of order-17; I check the order first."}`),
			call("order_status", `{"order":"order-17"}`),
			call(agentloop.ToolCreateTask, `{"subject":"Refund order-17","detail":"Asked in this room."}`),
		}},
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolUpdateTask, `{"task":"#1","status":"in_progress","active_form":"refunding order-17"}`),
			call("refund", `{"order":"order-17"}`),
		}},
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolUpdateTask, `{"task":"#1","status":"completed","comment":"Refunded order-17 in full."}`),
			call(agentloop.ToolStoreMemory, `{"content":"Asked for a refund of order-17 (a blue teapot, delivered damaged); refunded in full.","thought":"A later request about order-17 should know it was refunded.","type":"episodic","tags":["refunds"]}`),
		}},
		{Text: "I refunded order-17 in full (42.00 EUR)."},
	}
}

// anthropicOn is the Anthropic adapter on the official SDK, pointed at
// baseURL.
func anthropicOn(baseURL, apiKey string, opts ...option.RequestOption) *anthropicmodel.Model {
	client := anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(baseURL), option.WithAPIKey(apiKey)}, opts...)...)
	return &anthropicmodel.Model{Client: &client, Name: anthropic.ModelClaudeSonnet5_5}
}

// runFake plays one refund request on the in-process fake Band, with the
// fake model server behind the Anthropic SDK and a fake payment API, and
// prints the room, its board, the memory and what the model and the
// payment API were asked.
func runFake(ctx context.Context, out io.Writer, logger *slog.Logger) error {
	fb := fakeband.New(fakeband.Options{Seed: 1})
	defer fb.Close()
	agent := fb.AddAgent("assistant")
	ada := fb.AddHuman("ada")
	room := fb.AddRoom("support", ada, agent.ID)
	model, err := fakemodel.New(Script()...)
	if err != nil {
		return err
	}
	defer model.Close()
	payments := NewPaymentsServer()
	api := httptest.NewServer(payments)
	defer api.Close()

	shell, err := bandonce.New(bandonce.Config{
		APIKey:     agent.Key,
		BaseURL:    fb.BaseURL(),
		SocketURL:  fb.SocketURL(),
		HTTPClient: fb.HTTPClient(),
		Handler:    NewLoop(anthropicOn(model.URL, "fake-key"), &PaymentsClient{BaseURL: api.URL, HTTPClient: api.Client()}).Handler(),
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- shell.Run(ctx) }()

	msg, err := fb.Say(room.ID, ada.ID, "Hi, my teapot (order-17) arrived broken, can I get a refund?", agent.ID)
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
	names := map[string]string{agent.ID: agent.Name, ada.ID: ada.Name}
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
		lines = append(lines, line{p.Seq, fmt.Sprintf("%-10s %s%s", names[p.SenderID]+":", to, bandonce.StripMentions(firstLine(p.Content)))})
	}
	for _, e := range fb.ChatEvents(room.ID) {
		lines = append(lines, line{e.Seq, fmt.Sprintf("%-10s [%s] %s", names[e.SenderID]+":", e.MessageType, e.Content)})
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
		fmt.Fprintf(out, "board:     #%d %s [%s]\n", t.Number, t.Subject, status)
		for _, c := range t.Comments {
			fmt.Fprintf(out, "           %s: %s\n", names[c.AuthorID], firstLine(c.Text))
		}
	}
	for _, mem := range fb.Memories() {
		fmt.Fprintf(out, "memory:    about %s: %s\n", names[mem.SubjectID], mem.Content)
	}
	for order, n := range payments.Refunds() {
		fmt.Fprintf(out, "payments:  %s refunded %d time(s)\n", order, n)
	}
	answered := model.Answered()
	for step := 1; step <= len(answered); step++ {
		fmt.Fprintf(out, "model:     call %d made %d time(s)\n", step, answered[step])
	}
	return nil
}

// waitProcessed polls the fake's ground truth until the message is
// processed, or gives up after thirty seconds.
func waitProcessed(ctx context.Context, fb *fakeband.Band, agentID, msgID string) error {
	deadline := time.Now().Add(30 * time.Second)
	for fb.Status(agentID, msgID) != fakeband.StatusProcessed {
		if time.Now().After(deadline) {
			return fmt.Errorf("the message was not processed in 30s (status %q)", fb.Status(agentID, msgID))
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
