// Package ledgertest holds a bandonce.Ledger to its contract: one suite
// that MemoryLedger, boltledger and pgledger all pass, for anyone who
// writes a Ledger of their own.
//
// Call Run from a test of your ledger's package:
//
//	func TestLedgerContract(t *testing.T) {
//		ledgertest.Run(t, openMyLedger, reopenMyLedger)
//	}
//
// Each check is a subtest on a ledger of its own from open. What the suite
// asks of every ledger: each key reads back the state last set (KeyUnknown
// for none, and setting KeyUnknown removes it); an ack-pending record reads
// back until cleared; a step's result reads back as written, an empty one
// included, and is never shared with the caller's buffers; records of one
// room, message, step name or kind are never those of another, however
// their strings join; calls from many goroutines, one per room, keep all of
// that; and a call whose context has ended either does its work or fails
// with the context's error, never half.
//
// A durable ledger (Durable() true) promises more: that what a call
// recorded is there when the call returns, for the process that opens the
// store after this one died. The suite checks that through reopen, which
// must then be given; for a ledger that is not durable it must be nil, and
// those checks are skipped, saying so, since such a ledger promises nothing
// across a restart.
//
// A check writes at most a few hundred records, and fewer than 50 of a
// kind in any one room: a ledger that forgets records past a cap (as
// MemoryLedger does past MaxKeysPerRoom) passes with a cap of 50 or more.
//
// Check runs the same checks outside a test and returns what failed.
package ledgertest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/band-once/bandonce"
)

// Run runs the contract suite, one subtest a check, on ledgers from open.
//
// open returns a new, empty ledger for one check, failing t if it cannot,
// and registers with t.Cleanup whatever must be closed after the check.
//
// reopen is for a durable ledger, and must be nil for one that is not. It
// ends ledger's life as a crash of its process would (the ledger is not
// used again; whether it is closed first is reopen's choice, and a crash
// image of its store, taken while it is open, is the strictest test), and
// returns a ledger on the same store, as the restarted process would open
// it. It may be called on a ledger it returned.
func Run(t *testing.T, open func(t *testing.T) bandonce.Ledger, reopen func(t *testing.T, ledger bandonce.Ledger) bandonce.Ledger) {
	t.Helper()
	for _, g := range suite {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.checks {
				t.Run(c.name, func(t *testing.T) {
					if c.needsReopen && reopen == nil {
						t.Skip(notDurable)
					}
					s := &session{ctx: t.Context(), open: func() bandonce.Ledger { return open(t) }}
					if reopen != nil {
						s.reopen = func(l bandonce.Ledger) bandonce.Ledger { return reopen(t, l) }
					}
					c.run(t, s)
				})
			}
		})
	}
}

// notDurable is why a check of what survives a reopen does not run.
const notDurable = "no reopen was given, so the ledger is taken for one that is not durable: it promises nothing across a restart"

// Check runs the contract suite outside a test (in a program, an Example,
// or a test of a test) and returns nil when the ledger passed every check,
// or a *ContractError naming those it failed. open and reopen are Run's,
// with errors in place of a failed test; Check closes nothing they open.
func Check(ctx context.Context, open func(ctx context.Context) (bandonce.Ledger, error), reopen func(ctx context.Context, ledger bandonce.Ledger) (bandonce.Ledger, error)) error {
	failure := &ContractError{Details: map[string]string{}}
	for _, g := range suite {
		for _, c := range g.checks {
			if c.needsReopen && reopen == nil {
				continue
			}
			r := &recorder{}
			s := &session{ctx: ctx, open: func() bandonce.Ledger {
				l, err := open(ctx)
				if err != nil {
					r.Errorf("open: %v", err)
					r.FailNow()
				}
				return l
			}}
			if reopen != nil {
				s.reopen = func(l bandonce.Ledger) bandonce.Ledger {
					l, err := reopen(ctx, l)
					if err != nil {
						r.Errorf("reopen: %v", err)
						r.FailNow()
					}
					return l
				}
			}
			r.run(func() { c.run(r, s) })
			if r.failed {
				name := g.name + "/" + c.name
				failure.Failed = append(failure.Failed, name)
				failure.Details[name] = strings.Join(r.messages, "\n")
			}
		}
	}
	if len(failure.Failed) > 0 {
		return failure
	}
	return nil
}

// ContractError is Check's error: the checks a ledger failed.
type ContractError struct {
	// Failed names each failed check as Run names its subtest
	// ("Step/KeepsNoReferenceToTheResult"), in the suite's order.
	Failed []string
	// Details holds, by name, what each failed check reported.
	Details map[string]string
}

// Error names the failed checks on its first line, then gives each one's
// report.
func (e *ContractError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ledgertest: the ledger failed %d check(s): %s", len(e.Failed), strings.Join(e.Failed, ", "))
	for _, name := range e.Failed {
		fmt.Fprintf(&b, "\n--- %s\n%s", name, e.Details[name])
	}
	return b.String()
}

// tester is what a check needs of *testing.T: enough for testify's
// assert and require.
type tester interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// session gives a check its ledgers.
type session struct {
	ctx    context.Context
	open   func() bandonce.Ledger
	reopen func(bandonce.Ledger) bandonce.Ledger // nil for a ledger that is not durable
}

// check is one part of the contract.
type check struct {
	name        string
	needsReopen bool
	run         func(t tester, s *session)
}

// group is the suite's checks of one method or promise.
type group struct {
	name   string
	checks []check
}

var suite = []group{
	{"Key", keyChecks},
	{"AckPending", ackChecks},
	{"Step", stepChecks},
	{"Namespace", namespaceChecks},
	{"Durable", durableChecks},
	{"Concurrency", concurrencyChecks},
	{"Context", contextChecks},
	{"DeadLetters", deadLetterChecks},
}

// recorder is Check's tester. As with *testing.T, FailNow ends the
// goroutine of the check, and Errorf may be called from any goroutine.
type recorder struct {
	mu       sync.Mutex
	failed   bool
	messages []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.messages = append(r.messages, fmt.Sprintf(format, args...))
}

func (r *recorder) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	runtime.Goexit()
}

// Skip ends the check without a failure, as *testing.T's does.
func (r *recorder) Skip(...any) { runtime.Goexit() }

// run runs a check on a goroutine of its own, which FailNow may end, and
// takes a panic of the ledger's for a failure.
func (r *recorder) run(check func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		check()
	}()
	<-done
}
