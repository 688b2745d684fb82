package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/band-once/bandonce/agentloop"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// anthropicWire is the Anthropic Messages API's format.
type anthropicWire struct{}

type aBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type aMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type aRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system,omitempty"`
	Messages  []aMessage      `json:"messages"`
	Tools     []aTool         `json:"tools,omitempty"`
}

// blocks reads content that is a string or an array of blocks.
func blocks(raw json.RawMessage) ([]aBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []aBlock{{Type: "text", Text: s}}, nil
	}
	var bs []aBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content is neither a string nor blocks: %w", err)
	}
	return bs, nil
}

func blocksText(raw json.RawMessage) (string, error) {
	bs, err := blocks(raw)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n"), err
}

func (anthropicWire) decode(body []byte) (agentloop.Request, error) {
	var ar aRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return agentloop.Request{}, err
	}
	if len(ar.Messages) == 0 {
		return agentloop.Request{}, errNoMessages
	}
	sys, err := blocksText(ar.System)
	if err != nil {
		return agentloop.Request{}, fmt.Errorf("system: %w", err)
	}
	req := agentloop.Request{System: sys, MaxTokens: ar.MaxTokens}
	for _, t := range ar.Tools {
		req.Tools = append(req.Tools, agentloop.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	for i, m := range ar.Messages {
		bs, err := blocks(m.Content)
		if err != nil {
			return agentloop.Request{}, fmt.Errorf("message %d: %w", i, err)
		}
		switch m.Role {
		case "assistant":
			t := agentloop.Turn{Role: agentloop.RoleAssistant}
			for _, b := range bs {
				switch b.Type {
				case "text":
					t.Text += b.Text
				case "tool_use":
					t.ToolCalls = append(t.ToolCalls, agentloop.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				}
			}
			req.Turns = append(req.Turns, t)
		case "user":
			var text []string
			for _, b := range bs {
				switch b.Type {
				case "text":
					text = append(text, b.Text)
				case "tool_result":
					out, err := blocksText(b.Content)
					if err != nil {
						return agentloop.Request{}, fmt.Errorf("message %d: tool result: %w", i, err)
					}
					req.Turns = append(req.Turns, agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: b.ToolUseID, Text: out, IsError: b.IsError})
				}
			}
			if len(text) > 0 {
				req.Turns = append(req.Turns, agentloop.Turn{Role: agentloop.RoleUser, Text: strings.Join(text, "\n")})
			}
		default:
			return agentloop.Request{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return req, nil
}

// request encodes req in the Anthropic format, for Client.
func (anthropicWire) request(req agentloop.Request) aRequest {
	ar := aRequest{Model: "fake", MaxTokens: req.MaxTokens}
	if req.System != "" {
		ar.System, _ = json.Marshal(req.System)
	}
	for _, t := range req.Tools {
		ar.Tools = append(ar.Tools, aTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
	}
	var pending []aBlock // tool results, sent as one user message
	flush := func() {
		if len(pending) > 0 {
			raw, _ := json.Marshal(pending)
			ar.Messages = append(ar.Messages, aMessage{Role: "user", Content: raw})
			pending = nil
		}
	}
	for _, t := range req.Turns {
		switch t.Role {
		case agentloop.RoleTool:
			content, _ := json.Marshal(t.Text)
			pending = append(pending, aBlock{Type: "tool_result", ToolUseID: t.ToolCallID, Content: content, IsError: t.IsError})
		case agentloop.RoleAssistant:
			flush()
			var bs []aBlock
			if t.Text != "" {
				bs = append(bs, aBlock{Type: "text", Text: t.Text})
			}
			for _, c := range t.ToolCalls {
				bs = append(bs, aBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: c.Arguments})
			}
			raw, _ := json.Marshal(bs)
			ar.Messages = append(ar.Messages, aMessage{Role: "assistant", Content: raw})
		default:
			flush()
			raw, _ := json.Marshal(t.Text)
			ar.Messages = append(ar.Messages, aMessage{Role: "user", Content: raw})
		}
	}
	flush()
	return ar
}

type aResponse struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Model        string   `json:"model"`
	Content      []aBlock `json:"content"`
	StopReason   string   `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func (anthropicWire) encode(resp agentloop.Response, id string) any {
	out := aResponse{ID: "msg_fake_" + id, Type: "message", Role: "assistant", Model: "fake", StopReason: "end_turn", Content: []aBlock{}}
	if resp.Text != "" {
		out.Content = append(out.Content, aBlock{Type: "text", Text: resp.Text})
	}
	for _, c := range resp.ToolCalls {
		out.Content = append(out.Content, aBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: c.Arguments})
	}
	if len(resp.ToolCalls) > 0 {
		out.StopReason = "tool_use"
	}
	out.Usage.InputTokens, out.Usage.OutputTokens = 10, 10
	return out
}

func (anthropicWire) decodeResponse(raw []byte) (agentloop.Response, error) {
	var ar aResponse
	if err := json.Unmarshal(raw, &ar); err != nil {
		return agentloop.Response{}, err
	}
	resp := agentloop.Response{StopReason: ar.StopReason}
	for _, b := range ar.Content {
		switch b.Type {
		case "text":
			resp.Text += b.Text
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, agentloop.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
		}
	}
	return resp, nil
}

func (anthropicWire) errorBody(status int, msg string) any {
	kind := "api_error"
	switch status {
	case 429:
		kind = "rate_limit_error"
	case 400, 413:
		kind = "invalid_request_error"
	case 529:
		kind = "overloaded_error"
	}
	return map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}}
}

// openaiWire is the OpenAI Chat Completions API's format.
type openaiWire struct{}

type oToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []oToolCall     `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type oRequest struct {
	Model    string     `json:"model"`
	Messages []oMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// partsText reads content that is a string or an array of text parts.
func partsText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor parts: %w", err)
	}
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n"), nil
}

func (openaiWire) decode(body []byte) (agentloop.Request, error) {
	var or oRequest
	if err := json.Unmarshal(body, &or); err != nil {
		return agentloop.Request{}, err
	}
	if len(or.Messages) == 0 {
		return agentloop.Request{}, errNoMessages
	}
	req := agentloop.Request{MaxTokens: max(or.MaxTokens, or.MaxCompletionTokens)}
	for _, t := range or.Tools {
		req.Tools = append(req.Tools, agentloop.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	for i, m := range or.Messages {
		text, err := partsText(m.Content)
		if err != nil {
			return agentloop.Request{}, fmt.Errorf("message %d: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			req.System = strings.TrimPrefix(req.System+"\n"+text, "\n")
		case "user":
			req.Turns = append(req.Turns, agentloop.Turn{Role: agentloop.RoleUser, Text: text})
		case "assistant":
			t := agentloop.Turn{Role: agentloop.RoleAssistant, Text: text}
			for _, c := range m.ToolCalls {
				t.ToolCalls = append(t.ToolCalls, agentloop.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
			}
			req.Turns = append(req.Turns, t)
		case "tool":
			req.Turns = append(req.Turns, agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: m.ToolCallID, Text: text})
		default:
			return agentloop.Request{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return req, nil
}

func (openaiWire) encode(resp agentloop.Response, id string) any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if resp.Text != "" {
		msg["content"] = resp.Text
	}
	finish := "stop"
	if len(resp.ToolCalls) > 0 {
		var calls []oToolCall
		for _, c := range resp.ToolCalls {
			oc := oToolCall{ID: c.ID, Type: "function"}
			oc.Function.Name, oc.Function.Arguments = c.Name, string(c.Arguments)
			calls = append(calls, oc)
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	return map[string]any{
		"id": "chatcmpl-fake-" + id, "object": "chat.completion", "created": 1764547200, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	}
}

func (openaiWire) errorBody(status int, msg string) any {
	kind := "server_error"
	switch status {
	case 429:
		kind = "rate_limit_exceeded"
	case 400, 413:
		kind = "invalid_request_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": kind, "param": nil}}
}
