package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/anthropicmodel"
	"github.com/band-once/bandonce/agentloop/fakemodel"
	"github.com/band-once/bandonce/internal/examplekit"
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
	stage := examplekit.NewStage(1, "assistant", "ada")
	defer stage.Close()
	model, err := fakemodel.New(Script()...)
	if err != nil {
		return err
	}
	defer model.Close()

	loop := NewLoop(anthropicOn(model.URL, "fake-key"), &examplekit.PaymentsClient{BaseURL: stage.PaymentsURL})
	text := "Hi, my teapot (order-17) arrived broken, can I get a refund?"
	if err := stage.Play(ctx, loop.Handler(), logger, text, 30*time.Second); err != nil {
		return err
	}
	t := stage.Transcript(out, 10)
	t.Room()
	t.Board()
	for _, mem := range stage.Band.Memories() {
		t.Line("memory", "about %s: %s", stage.Names(mem.SubjectID), mem.Content)
	}
	t.Refunds()
	answered := model.Answered()
	for step := 1; step <= len(answered); step++ {
		t.Line("model", "call %d made %d time(s)", step, answered[step])
	}
	return nil
}
