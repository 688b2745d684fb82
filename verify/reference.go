package verify

import (
	"context"

	"github.com/band-once/bandonce"
)

// externalKey is the context key under which the Shell adapter hands a
// handler its life's External.
type externalKey struct{}

// ExternalFrom returns the External of the life a handler runs in, from the
// context the Shell adapter gives every handler call; nil outside the
// verifier. A test double of the agent's own side-effect client uses it to
// perform its effects where the verifier can judge them.
func ExternalFrom(ctx context.Context) *External {
	x, _ := ctx.Value(externalKey{}).(*External)
	return x
}

// ReferenceHandler is a correct handler, for comparison. For each message
// it performs one external side effect named by the message's natural key
// ("notify:" and the message id), only if the external system has not
// performed it yet, passing its own context so that an interrupt or a stop
// cancels the call; then it replies to the sender. The Shell guards the
// reply under the message's default key.
func ReferenceHandler(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if x := ExternalFrom(ctx); x != nil {
		key := "notify:" + m.ID
		if x.Performed(key) == 0 {
			if err := x.Effect(ctx, key); err != nil {
				return nil, err // a failure, or the cause of a cancellation
			}
		}
	}
	return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}}, nil
}

// ReferenceAgent is the reference agent: ReferenceHandler on a Shell with
// the default configuration, through the Shell adapter. It passes every
// check.
func ReferenceAgent() Factory { return Shell(ReferenceHandler) }
