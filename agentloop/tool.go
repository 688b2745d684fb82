package agentloop

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/band-once/bandonce"
)

// Journal says how the loop guards a tool's effect.
type Journal int

const (
	// Journaled runs the tool as a bandonce Step: its result is recorded
	// in the ledger, and a redelivery returns the record without running
	// it. Call.IdempotencyKey is the Step's key, for the external system.
	// This is the default, and what an author's tool with an effect wants.
	Journaled Journal = iota
	// Guarded runs the tool at every replay of the turn: it keeps its own
	// guarantee, keyed by Call.Key (Band's tools post under a dedup key
	// derived from it; a read changes nothing). Its result must be as
	// good the second time as the first.
	Guarded
)

// Tool is a tool the model may call: a name, a description and the JSON
// schema of its arguments for the model, and the Go func that runs it.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON schema of the arguments object.
	Schema json.RawMessage
	// Run performs the call and returns the result the model reads. An
	// error made with Refuse is the model's to read (a bad argument, an
	// order that does not exist); any other error ends the turn with it,
	// nothing recorded, so a redelivery runs the tool again.
	Run func(ctx context.Context, c Call) (string, error)
	// Journal is how the call is guarded; the zero value is Journaled.
	Journal Journal
}

// Call is one tool call as its Run func sees it.
type Call struct {
	// Msg is the message the turn answers.
	Msg *bandonce.Message
	// Arguments is the model's JSON arguments object.
	Arguments json.RawMessage
	// Key is the call's place in the turn, the same at every delivery:
	// "<message's default key>:<loop>:<model call>:<tool call>". It never
	// comes from the model's ids or words.
	Key string
	// IdempotencyKey is the key to hand an external system: the Step's
	// key for a Journaled tool, Key for a Guarded one.
	IdempotencyKey string
}

// Spec returns the tool's description for the model.
func (t Tool) Spec() ToolSpec {
	return ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema}
}

// Refusal is a tool's failure the model should read and may correct: a
// bad argument, a thing that does not exist. It is recorded like a
// result, with Turn.IsError set.
type Refusal struct {
	// Reason is what the model reads.
	Reason string
}

func (r *Refusal) Error() string { return "agentloop: tool refused: " + r.Reason }

// Refuse returns a Refusal with reason, for a tool's Run to return.
func Refuse(reason string) error { return &Refusal{Reason: reason} }

func asRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}
