package main

import (
	"context"
	"fmt"

	"github.com/band-once/bandonce"
)

// TipCents is what one tip costs its sender.
const TipCents = 100

// Payments is the world outside Band this agent changes. The agent owns
// the interface: main passes a client of the payment provider, the test
// passes the verifier's External through an adapter, and nothing here
// imports a test package.
type Payments interface {
	// Charge takes cents from payer once per idempotency key, with the
	// context of the work, so an interrupt or a stop cancels the call.
	Charge(ctx context.Context, idempotencyKey, payer string, cents int) error
	// Charged reports whether a charge with this key was taken.
	Charged(ctx context.Context, idempotencyKey string) (bool, error)
}

// NewHandler returns the agent's handler: every message that mentions it
// is a tip from its sender, charged once however often Band delivers the
// message, then thanked.
func NewHandler(p Payments) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		key := "tip:" + m.ID // the unit of work: this message's tip
		charged, err := p.Charged(ctx, key)
		if err != nil {
			return nil, err // Band serves the message again
		}
		if !charged {
			if err := p.Charge(ctx, key, m.SenderID, TipCents); err != nil {
				return nil, err // a failure, or the cause of a cancellation
			}
		}
		return &bandonce.Reply{
			Content:  fmt.Sprintf("thanks for the tip of %d cents", TipCents),
			Mentions: []string{m.SenderID},
		}, nil
	}
}
