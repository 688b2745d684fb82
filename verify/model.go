package verify

import (
	"context"
	"fmt"
	"time"
)

// ModelAnswer is what the Model double answers: a text and the tools it
// asks to call, as a language model's response carries them.
type ModelAnswer struct {
	// Text is the answer's wording: another at every call.
	Text string
	// ToolCalls are the tools the model asks for, numbered from zero in
	// every response, as many models number them.
	ToolCalls []ToolCall
}

// ToolCall is one tool a ModelAnswer asks to call.
type ToolCall struct {
	// ID is the call's id within its response: "call_0", "call_1", ...
	ID string
	// Name is the tool: one of a few, chosen anew at every call.
	Name string
}

// modelTools are the tools the Model double chooses among.
var modelTools = []string{"lookup_order", "refund", "notify_customer", "open_ticket"}

// modelWordings are the ways the Model double opens an answer.
var modelWordings = []string{"Sure.", "Done:", "Here you go:", "All set,", "Right away:"}

// Model is a double of the language model an agent consults: it answers
// the prompt differently at every call (another wording, other tools,
// tool call ids numbered from zero in each response), as a real model
// does, and takes a while (virtual time). A dedup key or an effect key
// derived from its answer therefore changes at a redelivery, and the
// verifier catches it; a key derived from the message does not. It
// returns the cause of ctx if ctx ends first, and ErrLifeEnded to a life
// that was killed. Its answers replay with the schedule's seed.
func (x *External) Model(ctx context.Context, prompt string) (ModelAnswer, error) {
	if x.ctx.Err() != nil {
		return ModelAnswer{}, ErrLifeEnded
	}
	if t := x.turnOf(); t != nil && x.obs != nil {
		x.obs.mu.Lock()
		t.asked = true
		x.obs.mu.Unlock()
	}
	w := x.world
	w.mu.Lock()
	w.modelCalls++
	n := w.modelCalls
	w.mu.Unlock()
	r := w.keyRand("model:"+prompt, n)
	t := time.NewTimer(time.Duration(20+r.IntN(180)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ModelAnswer{}, context.Cause(ctx)
	case <-x.ctx.Done():
		return ModelAnswer{}, ErrLifeEnded
	}
	a := ModelAnswer{Text: fmt.Sprintf("%s %s (draft %d)", modelWordings[r.IntN(len(modelWordings))], prompt, r.IntN(1000))}
	for i := range 1 + r.IntN(2) {
		a.ToolCalls = append(a.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d", i), Name: modelTools[r.IntN(len(modelTools))]})
	}
	return a, nil
}
