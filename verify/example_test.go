package verify_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/verify"
)

// echo is the agent under test: it answers every message.
func echo(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
}

// mailer is a broken agent: it sends an email for every delivery, so a
// redelivered message sends it twice.
func mailer(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if err := verify.ExternalFrom(ctx).Effect(ctx, "email:"+m.Body()); err != nil {
		return nil, err
	}
	return &bandonce.Reply{Content: "sent", Mentions: []string{m.SenderID}}, nil
}

// exampleT stands in for the *testing.T a test function gets, and prints
// what the verifier reports.
type exampleT struct {
	testing.TB
	failed bool
}

func (t *exampleT) Name() string                   { return "TestAgentIsExactlyOnce" }
func (t *exampleT) Helper()                        {}
func (t *exampleT) Logf(string, ...any)            {}
func (t *exampleT) Failed() bool                   { return t.failed }
func (t *exampleT) Errorf(format string, a ...any) { t.failed = true }

// A test file of an agent's package calls ExactlyOnce with the test's t:
//
//	func TestAgentIsExactlyOnce(t *testing.T) {
//		verify.ExactlyOnce(t, verify.Shell(echo))
//	}
//
// Here a stand-in t shows what the verifier reports.
func Example() {
	t := &exampleT{}
	res := verify.ExactlyOnce(t, verify.Shell(echo), verify.Schedules(5))
	fmt.Println("echo:", res.OK, t.Failed())

	t = &exampleT{}
	res = verify.ExactlyOnce(t, verify.Shell(mailer), verify.Schedules(5))
	fmt.Println("mailer:", res.OK, t.Failed())
	fmt.Println(res.Check, res.FirstViolatingSeed)
	fmt.Println(res.Reason)
	fmt.Println(res.Replay)
	// Output:
	// echo: true false
	// mailer: false true
	// kill-before-post 20260616
	// a non-idempotent side effect: the effect "email:r1m1 reply" was performed 3 times, by two deliveries of one message: ask External.Performed (or run the effect as a Message.Step) before performing it, so a redelivery does not do it again
	// BANDONCE_VERIFY_CHECK=kill-before-post BANDONCE_VERIFY_SEED=20260616 BANDONCE_VERIFY_SCHEDULES=1 go test -run '^TestAgentIsExactlyOnce$' github.com/band-once/bandonce/verify
}
