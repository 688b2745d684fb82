package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheCleanEchoAgentKeepsTheContract(t *testing.T) {
	res := VerifyLedgerAgent(CleanEchoAgent)
	require.True(t, res.OK, res.Reason)
	assert.Equal(t, defaultLedgerSweeps, res.SchedulesChecked)
	assert.Zero(t, res.FirstViolatingSeed)
}

func TestBrokenLedgerAgentsAreCaught(t *testing.T) {
	for name, tc := range map[string]struct {
		factory func() LedgerAgent
		reason  string
	}{
		"accepts every delivery": {func() LedgerAgent {
			return func(*Ledger, string, int, time.Time) Disposition { return Accepted }
		}, "a double-post"},
		"drops every delivery": {func() LedgerAgent {
			return func(l *Ledger, k string, a int, ts time.Time) Disposition {
				l.Record(k, a, ts)
				return DuplicateDropped
			}
		}, "a lost message"},
		"remembers keys in memory, which a kill forgets": {func() LedgerAgent {
			seen := map[string]bool{}
			return func(l *Ledger, k string, a int, ts time.Time) Disposition {
				l.Record(k, a, ts)
				if seen[k] {
					return DuplicateDropped
				}
				seen[k] = true
				return Accepted
			}
		}, "a double-post"},
		"keys the ledger by attempt": {func() LedgerAgent {
			return func(l *Ledger, k string, a int, ts time.Time) Disposition {
				return l.Record(fmt.Sprintf("%s:attempt-%d", k, a), a, ts).Disposition
			}
		}, "a double-post"},
		"accepts without recording": {func() LedgerAgent {
			seen := map[string]bool{}
			return func(l *Ledger, k string, a int, ts time.Time) Disposition {
				if seen[k] {
					return DuplicateDropped
				}
				seen[k] = true
				return Accepted
			}
		}, "a double-post"},
	} {
		t.Run(name, func(t *testing.T) {
			res := VerifyLedgerAgent(tc.factory, Schedules(50))
			require.False(t, res.OK)
			assert.Contains(t, res.Reason, tc.reason)
			assert.Equal(t, DefaultSeed+int64(res.SchedulesChecked-1), res.FirstViolatingSeed)
		})
	}
}

func TestTheLedgerAcceptsAKeyOnce(t *testing.T) {
	l := NewLedger()
	ts := time.Unix(0, 0)
	assert.Equal(t, Accepted, l.Record("k", 1, ts).Disposition)
	assert.Equal(t, DuplicateDropped, l.Record("k", 2, ts).Disposition)
	assert.Equal(t, Accepted, l.Record("j", 1, ts).Disposition)
	assert.Equal(t, []string{"j", "k"}, l.AcceptedKeys())
	assert.Equal(t, 1, l.DuplicatesDropped())
	assert.Len(t, l.History(), 3)
	assert.Equal(t, "ACCEPTED", Accepted.String())
	assert.Equal(t, "DUPLICATE_DROPPED", DuplicateDropped.String())
}

func TestLedgerSchedulesAreSeeded(t *testing.T) {
	broken := func() LedgerAgent {
		return func(*Ledger, string, int, time.Time) Disposition { return Accepted }
	}
	a := VerifyLedgerAgent(broken, Seed(7))
	b := VerifyLedgerAgent(broken, Seed(7))
	assert.Equal(t, a, b)
	assert.Equal(t, int64(7), a.FirstViolatingSeed)
}
