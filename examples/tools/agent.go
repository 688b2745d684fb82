package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
)

// Handler is the agent's tool loop, the shape an LLM agent's turn takes:
// it tracks its work as a task on the room's board (created, joined,
// completed with a comment), thinks (a thought event), calls a tool (a
// tool_call event, then the refund itself as a journaled Step with the
// payment API's idempotency key, then a tool_result event), stores what it
// learned as a memory about the sender, asks a second participant to
// confirm, and answers the sender. Every one of those effects happens
// once, however often the process is killed and the message served again.
func Handler(pay Payments) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		order := orderOf(m.Body())
		task, err := m.CreateTask(ctx, bandonce.Task{Subject: "Refund " + order, Detail: "Requested in this room."})
		if err != nil {
			return nil, err
		}
		if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "in_progress", ActiveForm: "refunding " + order}); err != nil {
			return nil, err
		}
		if err := m.Event(ctx, bandonce.Event{
			Type:    bandonce.EventThought,
			Content: "The sender asks for a refund of " + order + ". I will refund it, then ask someone to confirm.",
		}); err != nil {
			return nil, err
		}
		args, _ := json.Marshal(map[string]string{"order": order})
		if err := m.Event(ctx, bandonce.Event{
			Type:    bandonce.EventToolCall,
			Content: "refund(" + order + ")",
			Metadata: map[string]any{"id": "call-refund", "type": "function",
				"function": map[string]any{"name": "refund", "arguments": string(args)}},
		}); err != nil {
			return nil, err
		}
		receipt, err := m.Step(ctx, "refund", func(ctx context.Context, idempotencyKey string) ([]byte, error) {
			id, err := pay.Refund(ctx, idempotencyKey, order)
			return []byte(id), err
		})
		if err != nil {
			return nil, err
		}
		if err := m.Event(ctx, bandonce.Event{
			Type:     bandonce.EventToolResult,
			Content:  "refunded " + order + ": " + string(receipt),
			Metadata: map[string]any{"tool_call_id": "call-refund", "success": true, "receipt": string(receipt)},
		}); err != nil {
			return nil, err
		}
		if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed",
			Comment: "Refunded " + order + ", receipt " + string(receipt) + "."}); err != nil {
			return nil, err
		}
		if _, err := m.StoreMemory(ctx, bandonce.Memory{
			Content: "Asked for a refund of " + order + "; refunded with receipt " + string(receipt) + ".",
			System:  "long_term", Type: "episodic", Segment: "user", SubjectID: m.SenderID,
			Thought:  "A later request about " + order + " should know it was refunded.",
			Metadata: map[string]any{"tags": []string{"refunds"}},
		}); err != nil {
			return nil, err
		}
		goal, summary := "Refunds", "Refund what the room asks for, once each."
		if _, err := m.SetGoal(ctx, band.Goal{Title: &goal, Summary: &summary}); err != nil {
			return nil, err
		}
		followUp, err := m.CreateRoom(ctx, "Refund "+order+": follow-up")
		if err != nil {
			return nil, err
		}
		sender, confirmer, err := whoIsWho(ctx, m)
		if err != nil {
			return nil, err
		}
		if sender.Handle != "" {
			if _, err := m.AddContact(ctx, "@"+sender.Handle, "About "+order+": add me to reach me directly."); err != nil {
				return nil, err
			}
		}
		if err := m.Send(ctx, bandonce.Reply{
			Content:  "Could you confirm refund " + string(receipt) + " of " + order + "?",
			Mentions: []string{confirmer},
		}); err != nil {
			return nil, err
		}
		return &bandonce.Reply{
			Content:  "Refunded " + order + " (receipt " + string(receipt) + "); I asked for a confirmation. Follow-up: room " + followUp.ID + ".",
			Mentions: []string{m.SenderID},
		}, nil
	}
}

// whoIsWho finds the sender among the room's participants, and whom the
// agent asks to confirm: another participant than itself and the sender,
// mentioned by handle (Band resolves it), or the sender when the room has
// no one else.
func whoIsWho(ctx context.Context, m *bandonce.Message) (sender band.Participant, confirmer string, err error) {
	ps, err := m.Participants(ctx)
	if err != nil {
		return band.Participant{}, "", err
	}
	me := m.Me().ID
	sender.ID = m.SenderID
	for _, p := range ps {
		switch {
		case p.ID == m.SenderID:
			sender = p
		case p.ID == me || confirmer != "":
		case p.Handle != "":
			confirmer = "@" + p.Handle
		default:
			confirmer = p.ID
		}
	}
	if confirmer == "" {
		confirmer = m.SenderID
	}
	return sender, confirmer, nil
}

// orderOf reads the order a message is about: the word after "refund",
// else its first word.
func orderOf(body string) string {
	words := strings.Fields(body)
	for i, w := range words {
		if strings.EqualFold(w, "refund") && i+1 < len(words) {
			return strings.Trim(words[i+1], ".,;:!?")
		}
	}
	if len(words) > 0 {
		return words[0]
	}
	return "unknown"
}
