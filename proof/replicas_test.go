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

// What the replicas storm found, each a schedule that failed before its
// fix and holds now:
//   - seed 34: the answer to a standby's acquisition was lost, and the
//     takeover waited out a whole lease (pgledger now lets a holder take
//     its own lease again);
//   - seed 49: a graceful hand-over took a whole poll, a tenth of the
//     lease: 1 s (pgledger's standby now polls every twentieth);
//   - seed 20260834: a holder whose clock ran 0.64% slow woke from a
//     pause 5 ms after a standby took over and sent /next, its lease
//     still 60 ms long by its own clock (pgledger's holder now counts
//     its lease 1% short).
func TestTheReplicaStormsWitnessesHold(t *testing.T) {
	for _, seed := range []int64{34, 49, 20260834} {
		r := Simulate(t, Random(seed, GenOptions{Replicas: 2}), Options{})
		assert.Nil(t, r.Violation, "seed %d", seed)
		assert.NotEmpty(t, r.Failovers, "seed %d times a failover", seed)
	}
}
