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
// verifier. A test double of the agent's own side-effect client may use it
// to perform its effects where the verifier can judge them. A production
// handler must not call it: that links this package, and with it proof,
// fakeband and testing, into the binary. Take the effects as an interface
// instead (see ShellWith).
func ExternalFrom(ctx context.Context) *External {
	x, _ := ctx.Value(externalKey{}).(*External)
	return x
}

// ReferenceEffects is the reference agent's window onto the world outside
// Band. The agent owns the interface: in production a real client
// implements it, in the verifier External does, so nothing in the agent
// imports this package. A real agent declares its own, with the methods its
// work needs, in its own package.
type ReferenceEffects interface {
	// Performed reports how many times the effect named by key was
	// performed, whoever performed it.
	Performed(key string) int
	// Effect performs the effect named by key, with the context of the
	// work it belongs to.
	Effect(ctx context.Context, key string) error
}

// NewReferenceHandler returns a correct handler, the model to copy. For each
// message it performs one side effect through fx, named by the message's
// natural key ("notify:" and the message id), only if it was not performed
// yet, passing its own context so that an interrupt or a stop cancels the
// call; then it replies to the sender. The Shell guards the reply under the
// message's default key. A nil fx performs nothing.
func NewReferenceHandler(fx ReferenceEffects) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if fx != nil {
			key := "notify:" + m.ID
			if fx.Performed(key) == 0 {
				if err := fx.Effect(ctx, key); err != nil {
					return nil, err // a failure, or the cause of a cancellation
				}
			}
		}
		return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}}, nil
	}
}

// ReferenceHandler is NewReferenceHandler on the External of the call, in
// the form Shell takes, for tests that configure the reference agent
// (Shell(ReferenceHandler, cfg)). It finds the External with ExternalFrom,
// which a production handler must not do: copy NewReferenceHandler and
// ReferenceAgent, not this.
func ReferenceHandler(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	var fx ReferenceEffects
	if x := ExternalFrom(ctx); x != nil {
		fx = x
	}
	return NewReferenceHandler(fx)(ctx, m)
}

// ReferenceAgent is the reference agent: NewReferenceHandler on a Shell with
// the default configuration, its effects on the verifier's External through
// ShellWith. It passes every check.
func ReferenceAgent() Factory {
	return ShellWith(func(x *External) bandonce.Handler { return NewReferenceHandler(x) })
}
