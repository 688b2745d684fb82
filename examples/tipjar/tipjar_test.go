package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/deps"
	"github.com/band-once/bandonce/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testPayments is the payment provider in the verifier: each charge is an
// effect of the External double, named by its idempotency key, so the
// verifier sees every charge and judges that none is taken twice.
type testPayments struct{ x *verify.External }

func (p testPayments) Charge(ctx context.Context, idempotencyKey, _ string, _ int) error {
	return p.x.Effect(ctx, idempotencyKey)
}

func (p testPayments) Charged(_ context.Context, idempotencyKey string) (bool, error) {
	return p.x.Performed(idempotencyKey) > 0, nil
}

// tipjar is the agent as the verifier runs it: the production handler on
// the test's payments.
func tipjar() verify.Factory {
	return verify.ShellWith(func(x *verify.External) bandonce.Handler { return NewHandler(testPayments{x}) })
}

func TestTipjarIsExactlyOnce(t *testing.T) {
	res := verify.ExactlyOnce(t, tipjar())
	require.True(t, res.OK, res.Reason)
	for _, note := range res.NotApplicable {
		assert.NotContains(t, note, "side effects:", "the verifier saw the charges")
	}
}

// The same agent without its Charged check takes a tip again when Band
// delivers the message again: the verifier sees it, because the charge
// goes through the interface.
func TestAChargeWithoutItsCheckIsCaught(t *testing.T) {
	careless := verify.ShellWith(func(x *verify.External) bandonce.Handler {
		return NewHandler(forgetful{testPayments{x}})
	})
	rec := &recorder{TB: t, t: t}
	res := verify.ExactlyOnce(rec, careless, verify.Schedules(5))
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "a non-idempotent side effect")
	assert.NotEmpty(t, rec.errors, "the verifier failed the test")
}

// forgetful never finds a charge taken.
type forgetful struct{ testPayments }

func (forgetful) Charged(context.Context, string) (bool, error) { return false, nil }

// testPackages are the verifier's packages and the testing package.
var testPackages = []string{"testing", "github.com/band-once/bandonce/verify",
	"github.com/band-once/bandonce/proof", "github.com/band-once/bandonce/fakeband"}

// The production binary carries none of the verifier's packages: the
// handler takes its effects as an interface, and only the test file
// imports verify.
func TestTheBinaryLinksNoTestPackage(t *testing.T) {
	assert.Empty(t, deps.Linked(t, ".", testPackages...), "go list -deps of the agent")

	// The check can fail: a handler that calls verify.ExternalFrom links
	// what the verify package links.
	linked := deps.Linked(t, "github.com/band-once/bandonce/verify", testPackages...)
	for _, pkg := range testPackages {
		assert.Contains(t, linked, pkg)
	}
}

// recorder keeps what the verifier reports instead of failing the test,
// and hands it the real *testing.T for its simulations.
type recorder struct {
	testing.TB
	t      *testing.T
	mu     sync.Mutex
	errors []string
}

func (r *recorder) TestingT() *testing.T { return r.t }
func (r *recorder) Helper()              {}
func (r *recorder) Logf(string, ...any)  {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
