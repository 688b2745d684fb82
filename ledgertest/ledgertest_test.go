package ledgertest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/ledgertest"
)

func TestRunPassesAKeptContract(t *testing.T) {
	t.Run("durable", func(t *testing.T) {
		ledgertest.Run(t,
			func(*testing.T) bandonce.Ledger { return newFake(true, noFault) },
			func(_ *testing.T, l bandonce.Ledger) bandonce.Ledger { return l.(*fakeLedger).reopen() })
	})
	t.Run("not durable", func(t *testing.T) {
		ledgertest.Run(t, func(*testing.T) bandonce.Ledger { return newFake(false, noFault) }, nil)
	})
}

// Every fault is caught by the checks that look for it, and by no other.
func TestCheckCatchesEachBreach(t *testing.T) {
	reopen := func(_ context.Context, l bandonce.Ledger) (bandonce.Ledger, error) {
		return l.(*fakeLedger).reopen(), nil
	}
	forget := func(_ context.Context, l bandonce.Ledger) (bandonce.Ledger, error) {
		return newFake(l.Durable(), noFault), nil
	}
	for _, tc := range []struct {
		name    string
		durable bool
		fault   fault
		reopen  func(context.Context, bandonce.Ledger) (bandonce.Ledger, error)
		want    []string
	}{
		{"kept, durable", true, noFault, reopen, nil},
		{"kept, not durable", false, noFault, nil, nil},
		{"names joined", true, joinedNames, reopen, []string{
			"Namespace/KeysPerRoom", "Namespace/AckPendingPerRoomAndMessage", "Namespace/StepsPerRoomMessageAndName",
		}},
		{"result shared", true, sharedResult, reopen, []string{"Step/KeepsNoReferenceToTheResult"}},
		{"write behind", true, writeBehind, reopen, []string{
			"Durable/AnIntentWhenSetKeyReturns", "Durable/AStepWhenSetStepReturns", "Durable/EverythingAcrossReopens",
		}},
		{"half cancelled", true, halfCancelled, reopen, []string{"Context/EndedDoesAllOrNothing"}},
		{"forgets on reopen", true, noFault, forget, []string{
			"Durable/AnIntentWhenSetKeyReturns", "Durable/AStepWhenSetStepReturns", "Durable/EverythingAcrossReopens",
			"Concurrency/OneGoroutineARoom",
		}},
		{"durable without a reopen", true, noFault, nil, []string{"Durable/SaysWhatItPromises"}},
		{"a reopen for one not durable", false, noFault, reopen, []string{
			"Durable/SaysWhatItPromises", "Durable/EverythingAcrossReopens",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(context.Context) (bandonce.Ledger, error) { return newFake(tc.durable, tc.fault), nil }
			err := ledgertest.Check(t.Context(), open, tc.reopen)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			var contract *ledgertest.ContractError
			require.ErrorAs(t, err, &contract)
			assert.Equal(t, tc.want, contract.Failed)
			for _, name := range tc.want {
				assert.NotEmpty(t, contract.Details[name], name)
				assert.Contains(t, err.Error(), "--- "+name+"\n")
			}
		})
	}
}

func TestCheckReportsAnOpenThatFails(t *testing.T) {
	broken := errors.New("disk on fire")
	err := ledgertest.Check(t.Context(), func(context.Context) (bandonce.Ledger, error) { return nil, broken }, nil)
	var contract *ledgertest.ContractError
	require.ErrorAs(t, err, &contract)
	assert.Contains(t, contract.Failed, "Key/UnseenIsUnknown")
	assert.Contains(t, contract.Details["Key/UnseenIsUnknown"], "open: disk on fire")
}

// A ledger that panics fails the check that made it panic; Check goes on.
func TestCheckReportsAPanic(t *testing.T) {
	err := ledgertest.Check(t.Context(), func(context.Context) (bandonce.Ledger, error) { return panicky{newFake(false, noFault)}, nil }, nil)
	var contract *ledgertest.ContractError
	require.ErrorAs(t, err, &contract)
	assert.Contains(t, contract.Failed, "AckPending/ReadsBackUntilCleared")
	assert.NotContains(t, contract.Failed, "Key/UnseenIsUnknown")
	assert.Contains(t, contract.Details["AckPending/ReadsBackUntilCleared"], "panic: no acks here")
}

type panicky struct{ *fakeLedger }

func (panicky) SetAckPending(context.Context, string, string, bool) error { panic("no acks here") }
