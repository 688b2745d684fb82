package agentloop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/band-once/bandonce"
)

// The names of Band's tools, as the model sees them.
const (
	ToolSendMessage  = "band_send_message"
	ToolSendEvent    = "band_send_event"
	ToolParticipants = "band_participants"
	ToolPeers        = "band_peers"
)

// maxListed bounds the entries a listing tool hands the model.
const maxListed = 200

// BandTools returns Band's tools for the model: send a message, report an
// event (thought, tool_call, tool_result), list the room's participants
// and the peers that may be added, store a memory, create and update a
// task on the room's board, and set the room's goal. Each is dispatched
// through the Message's own method, so it keeps that method's guarantee:
// a message, an event, a memory, a task or a comment is written at most
// once per room under a dedup key derived from the call's place in the
// turn (Call.Key), and a redelivery that replays the turn skips what was
// written; a status or a goal is set again, with the effect of once.
func BandTools() []Tool {
	return append([]Tool{sendMessageTool(), sendEventTool(), participantsTool(), peersTool()}, agentTools()...)
}

func sendMessageTool() Tool {
	return Tool{
		Name:        ToolSendMessage,
		Description: "Post a message to the chat room now, before the final answer. Mention participants by id or @handle; with none, the sender is mentioned.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"content":{"type":"string","description":"The message text."},` +
			`"mentions":{"type":"array","items":{"type":"string"},"description":"Participant ids or @handles to mention."}},` +
			`"required":["content"],"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Content  string   `json:"content"`
				Mentions []string `json:"mentions"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			if strings.TrimSpace(a.Content) == "" {
				return "", Refuse("content is blank")
			}
			if len(a.Mentions) == 0 {
				a.Mentions = []string{c.Msg.SenderID}
			}
			if err := c.Msg.Send(ctx, bandonce.Reply{Content: a.Content, Mentions: a.Mentions, DedupKey: c.Key}); err != nil {
				return "", refusable(err)
			}
			return "sent", nil
		},
	}
}

func sendEventTool() Tool {
	return Tool{
		Name:        ToolSendEvent,
		Description: "Report an event to the room: a thought, a tool call or a tool result. Events need no mention.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"type":{"type":"string","enum":["thought","tool_call","tool_result"]},` +
			`"content":{"type":"string","description":"Human-readable text of the event."},` +
			`"metadata":{"type":"object","description":"Structured data of the event."}},` +
			`"required":["type","content"],"additionalProperties":false}`),
		Journal: Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			var a struct {
				Type     string         `json:"type"`
				Content  string         `json:"content"`
				Metadata map[string]any `json:"metadata"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return "", Refuse("bad arguments: " + err.Error())
			}
			switch t := bandonce.EventType(a.Type); t {
			case bandonce.EventThought, bandonce.EventToolCall, bandonce.EventToolResult:
			default:
				return "", Refuse(fmt.Sprintf("type %q is not thought, tool_call or tool_result", a.Type))
			}
			if strings.TrimSpace(a.Content) == "" {
				return "", Refuse("content is blank")
			}
			delete(a.Metadata, "dedup_key")
			err := c.Msg.Event(ctx, bandonce.Event{Type: bandonce.EventType(a.Type), Content: a.Content, Metadata: a.Metadata, DedupKey: c.Key})
			if err != nil {
				return "", refusable(err)
			}
			return "reported", nil
		},
	}
}

func participantsTool() Tool {
	return Tool{
		Name:        ToolParticipants,
		Description: "List the chat room's participants: id, type (User or Agent), role, name and handle.",
		Schema:      json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Journal:     Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			ps, err := c.Msg.Participants(ctx)
			if err != nil {
				return "", err
			}
			type entry struct {
				ID     string `json:"id"`
				Type   string `json:"type"`
				Role   string `json:"role,omitempty"`
				Name   string `json:"name,omitempty"`
				Handle string `json:"handle,omitempty"`
			}
			out := make([]entry, 0, min(len(ps), maxListed))
			for _, p := range ps[:min(len(ps), maxListed)] {
				out = append(out, entry{p.ID, p.Type, p.Role, p.Name, p.Handle})
			}
			return listing(out, len(ps))
		},
	}
}

func peersTool() Tool {
	return Tool{
		Name:        ToolPeers,
		Description: "List the agents and users that may be added to the room: id, type, name, handle and description.",
		Schema:      json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Journal:     Guarded,
		Run: func(ctx context.Context, c Call) (string, error) {
			ps, err := c.Msg.Peers(ctx)
			if err != nil {
				return "", err
			}
			type entry struct {
				ID          string `json:"id"`
				Type        string `json:"type"`
				Name        string `json:"name,omitempty"`
				Handle      string `json:"handle,omitempty"`
				Description string `json:"description,omitempty"`
			}
			out := make([]entry, 0, min(len(ps), maxListed))
			for _, p := range ps[:min(len(ps), maxListed)] {
				out = append(out, entry{p.ID, p.Type, p.Name, p.Handle, p.Description})
			}
			return listing(out, len(ps))
		},
	}
}

// listing encodes a listing for the model, saying when it was cut.
func listing[T any](entries []T, total int) (string, error) {
	raw, err := json.Marshal(entries)
	if err != nil {
		return "", err
	}
	if total > len(entries) {
		return fmt.Sprintf("%s\n(the first %d of %d)", raw, len(entries), total), nil
	}
	return string(raw), nil
}
