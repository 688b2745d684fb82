package main

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// verifyPayments is the payment API as the verifier's external system,
// for the turn of one message: it refunds once per idempotency key, and
// the verifier judges that no message gets its refund twice. The unit of
// work is the message, as the agent promises (one refund per request,
// however often Band delivers it), not the order its text names: two
// humans can say the same line, and each is a request of its own.
type verifyPayments struct {
	x       *verify.External
	message string
}

func (p verifyPayments) Refund(ctx context.Context, idempotencyKey, order string) (string, error) {
	if err := p.x.EffectOnce(ctx, idempotencyKey, "refund:"+p.message); err != nil {
		return "", err
	}
	return "re_" + idempotencyKey[len(idempotencyKey)-8:], nil
}

// The tool loop keeps exactly-once under every check of the verifier:
// crashes, lost answers, duplicates, look-alike messages, transient
// errors, interrupts, stops, supersede and the storm.
func TestToolsAgentIsExactlyOnce(t *testing.T) {
	res := verify.ExactlyOnce(t, verify.Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return Handler(verifyPayments{x: verify.ExternalFrom(ctx), message: m.ID}, Team{})(ctx, m)
	}))
	t.Logf("%d schedules", res.Schedules)
}
