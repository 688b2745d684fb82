package proof

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two replicas of the Shell on one leased ledger hold every invariant,
// the replica ones included, under deaths, pauses, hand-overs, skewed
// clocks, ledger outages and lost ledger answers.
func TestReplicasOfTheShellHoldUnderTheStorm(t *testing.T) {
	n := 300
	if raceEnabled {
		n = 60
	}
	rep := Run(t, RunConfig{Seed: 28, Schedules: n, Gen: GenOptions{Replicas: 2}})
	require.True(t, rep.Held, "first violation: %+v", rep.First)
	assert.Positive(t, rep.Faults["pause_past_lease"])
	assert.Positive(t, rep.Faults["handover"])
	assert.Positive(t, rep.Faults["ledger_outage"])
	assert.Positive(t, rep.Faults["ledger_answer_lost"])
}
