package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/lifecycle"
)

// ErrTooManyModelCalls is the cause of a turn that asked the model more
// than Loop.MaxModelCalls times without a final answer.
var ErrTooManyModelCalls = errors.New("agentloop: too many model calls without a final answer")

// ErrResponseTooLarge is the cause of a turn whose model response or tool
// result, encoded for the ledger, is larger than bandonce.MaxStepResult:
// the loop cannot record it, so it does not act on it.
var ErrResponseTooLarge = errors.New("agentloop: a model response or tool result is too large to record")

// ErrTooManyToolCalls is the cause of a turn whose model asked for more
// than MaxToolCalls tool calls in one response: the loop runs none of them.
var ErrTooManyToolCalls = errors.New("agentloop: too many tool calls in one model response")

// ErrEmptyAnswer is the cause of a turn whose model's final answer has no
// text: the message is given up, so the room is told, rather than marked
// done with nothing said.
var ErrEmptyAnswer = errors.New("agentloop: the model's final answer is empty")

// Defaults of a Loop's limits.
const (
	DefaultMaxModelCalls = 16
	DefaultMaxTokens     = 4096
)

// MaxToolCalls bounds the tool calls of one model response; every call's
// result goes into each later request of the turn.
const MaxToolCalls = 128

// Loop runs a turn of a tool-using model: model call, tool calls, model
// call ... final answer. Every model call is a journaled step: its
// response is recorded in the ledger before any of its tools runs, so a
// redelivery of the message replays the recorded responses instead of
// asking the model again, and the turn takes the same path. Every tool
// call runs at most once under a key derived from its place in the turn
// (model call n, tool call i), never from the model's own ids or words.
//
// A Loop is safe for concurrent turns; its fields must not change once a
// turn runs.
type Loop struct {
	// Model answers the calls.
	Model Model
	// System is the model's instructions.
	System string
	// Tools are the tools the model may call (the author's, and Band's
	// from BandTools). Names must be unique.
	Tools []Tool
	// Name tells two loops of one turn apart in their step names and
	// keys; empty means "agentloop". It must not change while messages
	// may still be redelivered. The names and keys made of it must be
	// valid: one line, not beginning with "bandonce:", and short enough
	// (under about 200 bytes) for a tool call's key to fit 256.
	Name string
	// MaxModelCalls bounds the model calls of a turn; 0 means
	// DefaultMaxModelCalls.
	MaxModelCalls int
	// MaxTokens is passed to the model; 0 means DefaultMaxTokens.
	MaxTokens int
}

// Result is a turn's outcome.
type Result struct {
	// Text is the model's final answer.
	Text string
	// ModelCalls is how many model calls the turn took, recorded or made.
	ModelCalls int
	// Conversation is the whole turn as the model saw it.
	Conversation []Turn
}

// Run runs the loop for m, with the message's body as the user's turn.
// ctx is the handler's: an interrupt or a stop cancels the model call in
// flight and Run returns the cause; what was recorded stays recorded and
// is replayed at the next delivery.
func (l *Loop) Run(ctx context.Context, m *bandonce.Message) (*Result, error) {
	return l.RunTurns(ctx, m, []Turn{{Role: RoleUser, Text: m.Body()}})
}

// RunTurns is Run with a conversation of the caller's to start from
// (earlier context, say). It must be the same at every delivery of m.
func (l *Loop) RunTurns(ctx context.Context, m *bandonce.Message, turns []Turn) (*Result, error) {
	tools := make(map[string]*Tool, len(l.Tools))
	specs := make([]ToolSpec, 0, len(l.Tools))
	for i := range l.Tools {
		t := &l.Tools[i]
		if _, dup := tools[t.Name]; dup || t.Name == "" || t.Run == nil {
			return nil, bandonce.Permanent(fmt.Errorf("agentloop: tool %d (%q): a tool needs a unique name and a Run func", i, t.Name))
		}
		tools[t.Name] = t
		specs = append(specs, t.Spec())
	}
	name := l.Name
	if name == "" {
		name = "agentloop"
	}
	maxCalls := l.MaxModelCalls
	if maxCalls <= 0 {
		maxCalls = DefaultMaxModelCalls
	}
	// A step's name, and the longest name the loop derives: a tool call's
	// key, under a message id as long as Band's.
	longest := bandonce.DefaultKey("00000000-0000-0000-0000-000000000000") + ":" + stepName(name, "tool", maxCalls, MaxToolCalls)
	for _, derived := range []string{stepName(name, "model", 1), longest} {
		if err := lifecycle.ValidateKey(derived); err != nil {
			return nil, bandonce.Permanent(fmt.Errorf("agentloop: Loop.Name %q cannot name the loop's steps and keys: %w", l.Name, err))
		}
	}
	maxTokens := l.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	conv := append([]Turn(nil), turns...)
	for n := 1; n <= maxCalls; n++ {
		req := Request{System: l.System, Turns: conv, Tools: specs, MaxTokens: maxTokens}
		resp, err := l.modelCall(ctx, m, name, n, req)
		if err != nil {
			return nil, err
		}
		conv = append(conv, Turn{Role: RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return &Result{Text: resp.Text, ModelCalls: n, Conversation: conv}, nil
		}
		for i, tc := range resp.ToolCalls {
			out, failed, err := l.toolCall(ctx, m, name, n, i, tools[tc.Name], tc)
			if err != nil {
				return nil, err
			}
			conv = append(conv, Turn{Role: RoleTool, ToolCallID: tc.ID, Text: out, IsError: failed})
		}
	}
	return nil, bandonce.Permanent(fmt.Errorf("%w (%d)", ErrTooManyModelCalls, maxCalls))
}

// stepName is the ledger's name of a model call ("model:n") or a tool
// call ("tool:n:i") of the loop.
func stepName(loop, what string, pos ...int) string {
	s := loop + ":" + what
	for _, p := range pos {
		s += ":" + strconv.Itoa(p)
	}
	return s
}

// modelCall makes the n-th model call of the turn as a Step, or returns
// its recorded response.
func (l *Loop) modelCall(ctx context.Context, m *bandonce.Message, loop string, n int, req Request) (Response, error) {
	name := stepName(loop, "model", n)
	raw, err := m.Step(ctx, name, func(ctx context.Context, _ string) ([]byte, error) {
		resp, err := l.Model.Complete(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(resp.ToolCalls) > MaxToolCalls {
			return nil, bandonce.Permanent(fmt.Errorf("agentloop: %s: %w: %d, at most %d", name, ErrTooManyToolCalls, len(resp.ToolCalls), MaxToolCalls))
		}
		for i, tc := range resp.ToolCalls {
			if len(tc.Arguments) > 0 && !json.Valid(tc.Arguments) {
				// A call cut short (max_tokens) or garbled: kept as the
				// text it is, which the tool call answers as the model's
				// mistake; as raw JSON it could not be recorded at all.
				resp.ToolCalls[i].Arguments, _ = json.Marshal(string(tc.Arguments))
			}
		}
		return encode(name, resp)
	})
	if err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return Response{}, bandonce.Permanent(fmt.Errorf("agentloop: %s: recorded response: %w", name, err))
	}
	return resp, nil
}

// toolRecord is a tool call's result as the ledger keeps it.
type toolRecord struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
}

// toolCall runs tool call i of model call n (or returns its record):
// an unknown tool or arguments that are not a JSON object are the
// model's mistake to read, decided from the recorded response alone.
func (l *Loop) toolCall(ctx context.Context, m *bandonce.Message, loop string, n, i int, t *Tool, tc ToolCall) (string, bool, error) {
	if t == nil {
		return "no tool is named " + strconv.Quote(tc.Name), true, nil
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return "the arguments are not a JSON object: " + err.Error(), true, nil
	}
	if obj == nil { // null, which unmarshals into a map without an error
		return "the arguments are not a JSON object: null", true, nil
	}
	key := bandonce.DefaultKey(m.ID) + ":" + stepName(loop, "tool", n, i)
	call := Call{Msg: m, Arguments: args, Key: key}
	if t.Journal == Guarded {
		call.IdempotencyKey = key
		out, err := t.Run(ctx, call)
		if r, ok := asRefusal(err); ok {
			return r.Reason, true, nil
		}
		return out, false, err
	}
	name := stepName(loop, "tool", n, i)
	raw, err := m.Step(ctx, name, func(ctx context.Context, idem string) ([]byte, error) {
		call.IdempotencyKey = idem
		out, err := t.Run(ctx, call)
		rec := toolRecord{Text: out}
		if r, ok := asRefusal(err); ok {
			rec = toolRecord{Text: r.Reason, IsError: true}
		} else if err != nil {
			return nil, err
		}
		return encode(name, rec)
	})
	if err != nil {
		return "", false, err
	}
	var rec toolRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", false, bandonce.Permanent(fmt.Errorf("agentloop: %s: recorded result: %w", name, err))
	}
	return rec.Text, rec.IsError, nil
}

// encode encodes a record for the ledger, refusing one past
// bandonce.MaxStepResult before the Step would.
func encode(name string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, bandonce.Permanent(fmt.Errorf("agentloop: %s: %w", name, err))
	}
	if len(raw) > bandonce.MaxStepResult {
		return nil, bandonce.Permanent(fmt.Errorf("agentloop: %s: %w: %d bytes, more than bandonce.MaxStepResult (%d)", name, ErrResponseTooLarge, len(raw), bandonce.MaxStepResult))
	}
	return raw, nil
}

// Handler returns a bandonce.Handler that runs the loop and replies to
// the sender with the final answer.
func (l *Loop) Handler() bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		res, err := l.Run(ctx, m)
		if err != nil {
			return nil, err
		}
		if lifecycle.Blank(res.Text) {
			return nil, bandonce.Permanent(ErrEmptyAnswer)
		}
		return &bandonce.Reply{Content: res.Text, Mentions: []string{m.SenderID}}, nil
	}
}
