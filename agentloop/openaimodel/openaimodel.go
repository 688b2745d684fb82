// Package openaimodel adapts the OpenAI Chat Completions API, through the
// official SDK (github.com/openai/openai-go/v3), to agentloop.Model. It
// is a package of its own so that neither bandonce nor agentloop links
// the SDK.
package openaimodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/internal/bodycap"
)

// Model is an agentloop.Model on the Chat Completions API.
type Model struct {
	// Client is the SDK's client; its options (API key, base URL,
	// retries, HTTP client) are the author's.
	Client *openai.Client
	// Name is the model to call, such as "gpt-4.1".
	Name shared.ChatModel
	// MaxAnswerBytes caps the body of an answer the SDK reads (it reads
	// each whole): past it the call fails, Permanent, naming the cap.
	// Zero means 32 MiB.
	MaxAnswerBytes int64
}

// Complete makes one Chat Completions call. ctx cancels the HTTP call in
// flight.
func (m *Model) Complete(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	params, err := Params(m.Name, req)
	if err != nil {
		return agentloop.Response{}, err
	}
	c, err := m.Client.Chat.Completions.New(ctx, params, option.WithMiddleware(bodycap.Middleware(m.MaxAnswerBytes)))
	if err != nil {
		return agentloop.Response{}, failure(err)
	}
	if len(c.Choices) == 0 {
		return agentloop.Response{}, fmt.Errorf("openaimodel: the completion %q has no choice", c.ID)
	}
	ch := c.Choices[0]
	resp := agentloop.Response{Text: ch.Message.Content, StopReason: ch.FinishReason}
	if resp.Text == "" {
		resp.Text = ch.Message.Refusal // the model's words when it declines
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "function" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, agentloop.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
	}
	return resp, nil
}

// Params encodes a loop's request as the SDK's parameters.
func Params(model shared.ChatModel, req agentloop.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: model}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if len(t.Schema) > 0 {
			if err := json.Unmarshal(t.Schema, &params); err != nil {
				return p, fmt.Errorf("openaimodel: tool %q: schema: %w", t.Name, err)
			}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	for _, t := range req.Turns {
		switch t.Role {
		case agentloop.RoleTool:
			text := t.Text
			if t.IsError {
				text = "error: " + text
			}
			p.Messages = append(p.Messages, openai.ToolMessage(text, t.ToolCallID))
		case agentloop.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if t.Text != "" {
				a.Content.OfString = openai.String(t.Text)
			}
			for _, c := range t.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(c.Arguments)},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			p.Messages = append(p.Messages, openai.UserMessage(t.Text))
		}
	}
	return p, nil
}

// failure is a call's error once the SDK's retries are spent, with what
// its answer means for the turn (agentloop.APIFailure).
func failure(err error) error {
	return agentloop.FailureOf(err, func(e *openai.Error) (int, *http.Response) { return e.StatusCode, e.Response })
}
