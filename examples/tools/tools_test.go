package main

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/band-once/bandonce/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// verifyPayments is the payment API as the verifier's external system:
// it refunds an order once per idempotency key, and the verifier judges
// that no order is refunded twice.
type verifyPayments struct{}

func (verifyPayments) Refund(ctx context.Context, idempotencyKey, order string) (string, error) {
	if err := verify.ExternalFrom(ctx).EffectOnce(ctx, idempotencyKey, "refund:"+order); err != nil {
		return "", err
	}
	return "re_" + idempotencyKey[len(idempotencyKey)-8:], nil
}

// The tool loop keeps exactly-once under every check of the verifier:
// crashes, lost answers, duplicates, transient errors, interrupts, stops,
// supersede and the storm.
func TestToolsAgentIsExactlyOnce(t *testing.T) {
	res := verify.ExactlyOnce(t, verify.Shell(Handler(verifyPayments{})))
	t.Logf("%d schedules", res.Schedules)
}
