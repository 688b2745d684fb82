package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/examplekit"
)

// Handler is the agent's tool loop, the shape an LLM agent's turn takes:
// it tracks its work as a task on the room's board (created, joined,
// completed with a comment), thinks (a thought event), calls a tool (a
// tool_call event, then the refund itself as a journaled Step with the
// payment API's idempotency key, then a tool_result event), stores what it
// learned as a memory about the sender, retires what it knew of the
// order before (see tidy), answers its team's contact requests, brings
// the agent now in charge of billing into the room and takes out the one
// it replaced (see staff), asks a second participant to confirm, and
// answers the sender. Every one of
// those effects happens once, however often the process is killed and
// the message served again.
func Handler(pay examplekit.Payments, team Team) bandonce.Handler {
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
		learned, err := m.StoreMemory(ctx, bandonce.Memory{
			Content: "Asked for a refund of " + order + "; refunded with receipt " + string(receipt) + ".",
			System:  "long_term", Type: "episodic", Segment: "user", SubjectID: m.SenderID,
			Thought:  "A later request about " + order + " should know it was refunded.",
			Metadata: map[string]any{"tags": []string{"refunds"}, "order": order},
		})
		if err != nil {
			return nil, err
		}
		if err := tidy(ctx, m, order, learned.ID); err != nil {
			return nil, err
		}
		if err := team.answer(ctx, m); err != nil {
			return nil, err
		}
		if err := team.staff(ctx, m); err != nil {
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

// tidy retires what the agent knew of order before this turn, now that
// the refund settled it: a fact it learned was wrong (a semantic memory,
// such as "order-17 may not be refunded") is superseded, a note gone stale
// (any other memory about the order, such as a reminder to chase it) is
// archived. Which memories those are is read once, as a journaled Step,
// so a redelivery retires the ones the first delivery chose, not others:
// both are changes of state, and a repeat leaves Band as one does.
func tidy(ctx context.Context, m *bandonce.Message, order, keep string) error {
	raw, err := m.Step(ctx, "retire-memories", func(ctx context.Context, _ string) ([]byte, error) {
		known, err := m.Band().Memories(ctx, band.MemoryFilter{SubjectID: m.SenderID})
		if err != nil {
			return nil, err
		}
		var retire retirement
		for _, mem := range known {
			switch {
			case mem.ID == keep || mem.Metadata["order"] != order:
			case mem.Type == "semantic":
				retire.Supersede = append(retire.Supersede, mem.ID)
			default:
				retire.Archive = append(retire.Archive, mem.ID)
			}
		}
		return json.Marshal(retire)
	})
	if err != nil {
		return err
	}
	var retire retirement
	if err := json.Unmarshal(raw, &retire); err != nil {
		return err
	}
	for _, id := range retire.Supersede {
		if _, err := m.SupersedeMemory(ctx, id); err != nil {
			return err
		}
	}
	for _, id := range retire.Archive {
		if _, err := m.ArchiveMemory(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// retirement is what tidy chose: the ids of the memories to supersede and
// to archive.
type retirement struct {
	Supersede []string `json:"supersede"`
	Archive   []string `json:"archive"`
}

// Team is the agents this one works with, by handle ("" for none): it
// approves the contact request of Billing, the payment team's agent that
// wants to hear of refunds, and ends its contact with Retired, the agent
// Billing replaced; in the room, Billing takes Retired's place.
type Team struct {
	Billing, Retired string
}

// answer approves Billing's contact request and removes Retired: changes
// of state whose repeat Band recognises (the request already answered,
// the contact already gone), made again at every delivery.
func (team Team) answer(ctx context.Context, m *bandonce.Message) error {
	if team.Billing != "" {
		_, err := m.RespondToContactRequest(ctx, band.ContactApprove, team.Billing)
		var apiErr *band.APIError
		if err != nil && !(errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound) { // 404: Billing never asked
			return err
		}
	}
	if team.Retired != "" {
		if err := m.RemoveContact(ctx, team.Retired); err != nil {
			return err
		}
	}
	return nil
}

// staff brings Billing into the room and takes Retired out of it: changes
// of state whose repeat Band recognises (already in the room, already
// gone), made again at every delivery. The handles are looked up among
// the room's participants and then the agent's peers (those not in the
// room), so a redelivery finds both, whichever side of the room each is
// on by then.
func (team Team) staff(ctx context.Context, m *bandonce.Message) error {
	if team.Billing == "" && team.Retired == "" {
		return nil
	}
	ids := map[string]string{}
	ps, err := m.Participants(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		ids["@"+p.Handle] = p.ID
	}
	peers, err := m.Peers(ctx)
	if err != nil {
		return err
	}
	for _, p := range peers {
		ids["@"+p.Handle] = p.ID
	}
	if team.Billing != "" {
		id, ok := ids[team.Billing]
		if !ok {
			return fmt.Errorf("tools: %s is neither in the room nor a peer", team.Billing)
		}
		if _, err := m.AddParticipant(ctx, id, band.RoleMember); err != nil {
			return err
		}
	}
	if team.Retired != "" {
		if id, ok := ids[team.Retired]; ok { // not a peer any more: nothing to take out
			if err := m.RemoveParticipant(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
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
