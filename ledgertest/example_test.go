package ledgertest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/ledgertest"
)

// In a test, ledgertest.Run(t, open, reopen) runs the suite as subtests.
// Check runs the same checks anywhere else: here on MemoryLedger, which is
// not durable, so it is given no reopen.
func ExampleCheck() {
	err := ledgertest.Check(context.Background(), func(context.Context) (bandonce.Ledger, error) {
		return bandonce.NewMemoryLedger(), nil
	}, nil)
	fmt.Println("MemoryLedger:", err)
	// Output: MemoryLedger: <nil>
}

// stepsByReference is a ledger that keeps a step's result as the caller's
// buffer: the handler that goes on using the buffer changes the record.
type stepsByReference struct {
	*bandonce.MemoryLedger
	mu    sync.Mutex
	steps map[[3]string][]byte
}

func (l *stepsByReference) SetStep(_ context.Context, room, messageID, name string, result []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps[[3]string{room, messageID, name}] = result
	return nil
}

func (l *stepsByReference) Step(_ context.Context, room, messageID, name string) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	result, ok := l.steps[[3]string{room, messageID, name}]
	return result, ok, nil
}

// The suite names the check a broken ledger fails.
func ExampleCheck_aBrokenLedger() {
	err := ledgertest.Check(context.Background(), func(context.Context) (bandonce.Ledger, error) {
		return &stepsByReference{MemoryLedger: bandonce.NewMemoryLedger(), steps: map[[3]string][]byte{}}, nil
	}, nil)
	var contract *ledgertest.ContractError
	if errors.As(err, &contract) {
		fmt.Println(contract.Failed)
	}
	// Output: [Step/KeepsNoReferenceToTheResult]
}
