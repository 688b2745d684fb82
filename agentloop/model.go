package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/wire"
)

// Role says who speaks a Turn of the conversation the loop hands a Model.
type Role string

// The roles of a conversation.
const (
	// RoleUser is the message the turn answers.
	RoleUser Role = "user"
	// RoleAssistant is a response of the model: text, tool calls or both.
	RoleAssistant Role = "assistant"
	// RoleTool is the result of one tool call.
	RoleTool Role = "tool"
)

// Turn is one entry of the conversation a Model is given.
type Turn struct {
	Role Role `json:"role"`
	// Text is the entry's text: the user's words, the model's answer, or
	// a tool's result.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls a RoleAssistant entry asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names, in a RoleTool entry, the call whose result it is:
	// the model's own id, which the model needs to pair them.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a RoleTool entry whose call failed.
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is one call of a tool the model asks for.
type ToolCall struct {
	// ID is the model's id of the call. It pairs the call with its
	// result in the conversation and is never used as a key: a model
	// numbers its calls afresh at every response.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the call's JSON arguments object.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to the model: its name, what it does, and
// the JSON schema of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// Request is one model call: the instructions, the conversation so far
// and the tools the model may call.
type Request struct {
	System    string     `json:"system,omitempty"`
	Turns     []Turn     `json:"turns"`
	Tools     []ToolSpec `json:"tools,omitempty"`
	MaxTokens int        `json:"max_tokens,omitempty"`
}

// Response is what a model call returns: a final answer (Text, no
// ToolCalls) or tool calls to run before the next call.
type Response struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// StopReason is the model's own word for why it stopped, kept for
	// logs; the loop decides by ToolCalls alone.
	StopReason string `json:"stop_reason,omitempty"`
}

// Model is a language model behind any provider's API. Complete must
// honour ctx: an interrupt or a stop cancels the call in flight. Its
// errors are returned by Loop.Run as they are, so a provider's transient
// error makes the shell deliver the message again, and the calls already
// recorded are replayed, not repeated.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req Request) (Response, error)

// Complete calls f.
func (f ModelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

// APIFailure is what a model API's failed answer means for the turn, for
// an adapter to return once its SDK's own retries are spent. Any answer
// with a Retry-After waits what the server asks (bandonce.RetryAfter),
// instead of the shell's backoff; a 4xx other than 408, 409 and 429 can
// never succeed as asked, so it is Permanent and the message is given up
// at once rather than after MaxAttempts failures; anything else (a 429 or
// a 529 without the header, a 5xx) is err as it is, for the shell's
// backoff. status and header are the failed answer's.
func APIFailure(err error, status int, header http.Header) error {
	if d, ok := wire.ParseRetryAfter(header.Get("Retry-After"), time.Now()); ok && d > 0 {
		return bandonce.RetryAfter(err, d)
	}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return err
	case status >= 400 && status < 500:
		return bandonce.Permanent(err)
	}
	return err
}

// FailureOf is APIFailure for an adapter whose SDK's errors are of type
// E: answer reads the failed answer's status and response from one.
// Any other error is returned as it is.
func FailureOf[E error](err error, answer func(E) (int, *http.Response)) error {
	var e E
	if !errors.As(err, &e) {
		return err
	}
	status, resp := answer(e)
	var header http.Header
	if resp != nil {
		header = resp.Header
	}
	return APIFailure(err, status, header)
}
