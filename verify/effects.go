package verify

import (
	"context"

	"github.com/band-once/bandonce"
)

// ShellWith adapts a handler that performs its side effects through an
// interface the agent owns, as Shell adapts a plain Handler: build gets
// the External of each handler call and returns the handler to run.
//
// This keeps the test packages out of the production binary. The agent's
// package declares the interface its work needs and a constructor taking
// it; main passes the real client, and the agent's test passes External,
// directly when the interface is made of External's methods (as
// ReferenceEffects is), else through an adapter of a few lines in a
// _test.go file:
//
//	// agent.go: no import of verify.
//	type Payments interface {
//		Charge(ctx context.Context, order string, cents int) error
//		Charged(ctx context.Context, order string) (bool, error)
//	}
//	func NewHandler(p Payments) bandonce.Handler { ... }
//
//	// agent_test.go
//	type testPayments struct{ x *verify.External }
//	func (p testPayments) Charge(ctx context.Context, order string, _ int) error {
//		return p.x.Effect(ctx, "charge:"+order)
//	}
//	func (p testPayments) Charged(_ context.Context, order string) (bool, error) {
//		return p.x.Performed("charge:"+order) > 0, nil
//	}
//	func TestAgentIsExactlyOnce(t *testing.T) {
//		verify.ExactlyOnce(t, verify.ShellWith(func(x *verify.External) bandonce.Handler {
//			return NewHandler(testPayments{x})
//		}))
//	}
//
// build runs for every handler call, so keep it cheap (a closure over its
// argument); cfg is as for Shell.
func ShellWith(build func(x *External) bandonce.Handler, cfg ...bandonce.Config) Factory {
	return Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return build(ExternalFrom(ctx))(ctx, m)
	}, cfg...)
}
