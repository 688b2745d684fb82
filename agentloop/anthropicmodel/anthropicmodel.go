// Package anthropicmodel adapts the Anthropic Messages API, through the
// official SDK (github.com/anthropics/anthropic-sdk-go/v2), to
// agentloop.Model. It is a package of its own so that neither bandonce
// nor agentloop links the SDK.
package anthropicmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/internal/bodycap"
)

// Model is an agentloop.Model on the Anthropic Messages API.
type Model struct {
	// Client is the SDK's client; its options (API key, base URL,
	// retries, HTTP client) are the author's.
	Client *anthropic.Client
	// Name is the model to call, such as "claude-sonnet-4-5".
	Name anthropic.Model
	// MaxAnswerBytes caps the body of an answer the SDK reads (it reads
	// each whole): past it the call fails, Permanent, naming the cap.
	// Zero means 32 MiB.
	MaxAnswerBytes int64
}

// Complete makes one Messages call. ctx cancels the HTTP call in flight.
func (m *Model) Complete(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	params, err := Params(m.Name, req)
	if err != nil {
		return agentloop.Response{}, err
	}
	msg, err := m.Client.Messages.New(ctx, params, option.WithMiddleware(bodycap.Middleware(m.MaxAnswerBytes)))
	if err != nil {
		return agentloop.Response{}, failure(err)
	}
	return response(msg), nil
}

// Params encodes a loop's request as the SDK's parameters.
func Params(model anthropic.Model, req agentloop.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: model, MaxTokens: int64(req.MaxTokens)}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Schema)
		if err != nil {
			return p, fmt.Errorf("anthropicmodel: tool %q: %w", t.Name, err)
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	var results []anthropic.ContentBlockParamUnion // tool results, one user message
	flush := func() {
		if len(results) > 0 {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for _, t := range req.Turns {
		switch t.Role {
		case agentloop.RoleTool:
			block := anthropic.NewToolResultBlock(t.ToolCallID, t.Text, t.IsError)
			if t.Text == "" {
				// A tool that said nothing: a result with no content, since
				// the API refuses an empty text block.
				block.OfToolResult.Content = nil
			}
			results = append(results, block)
		case agentloop.RoleAssistant:
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if t.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(t.Text))
			}
			for _, c := range t.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, c.Arguments, c.Name))
			}
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			flush()
			p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(t.Text)))
		}
	}
	flush()
	return p, nil
}

// inputSchema splits a JSON schema into the SDK's fields.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, fmt.Errorf("schema: %w", err)
	}
	s.Properties = m["properties"]
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	delete(m, "type")
	delete(m, "properties")
	delete(m, "required")
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s, nil
}

func response(msg *anthropic.Message) agentloop.Response {
	resp := agentloop.Response{StopReason: string(msg.StopReason)}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			resp.Text += b.Text
		case "tool_use":
			args := append(json.RawMessage(nil), b.Input...)
			resp.ToolCalls = append(resp.ToolCalls, agentloop.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	return resp
}

// failure is a call's error once the SDK's retries are spent, with what
// its answer means for the turn (agentloop.APIFailure).
func failure(err error) error {
	return agentloop.FailureOf(err, func(e *anthropic.Error) (int, *http.Response) { return e.StatusCode, e.Response })
}
