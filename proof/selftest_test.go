package proof

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The prover is only worth its receipt if it fails agents that are wrong.
// Each case is the hand-made REST loop with one defect switched on; the
// prover must fail it with the invariant the defect breaks and shrink the
// first violating schedule to a 1-minimal witness that replays. Under the
// race detector, which slows each schedule tenfold, a case runs only the
// schedule that catches it first of seeds 1 to 400 (first); without it,
// all 400.
func TestBrokenAgentsFailWithTheRightReasonAndAMinimalWitness(t *testing.T) {
	// The hand-made loop lists its rooms once, at start-up.
	replies := GenOptions{RepliesOnly: true, NoJoins: true}
	for _, tc := range []struct {
		name   string
		defect defects
		gen    GenOptions
		want   Invariant
		reason string
		first  int64
	}{
		{"guard disabled", defects{guardDisabled: true}, replies, NoDoublePost, "replies with key", 4},
		{"ack before post", defects{ackBeforePost: true}, replies, OneOutcome, "marked processed before its reply was posted", 1},
		{"POST re-sent blind", defects{blindResend: true}, replies, NoDoublePost, "replies with key", 4},
		{"guard reads one page", defects{onePageGuard: true},
			GenOptions{RepliesOnly: true, NoJoins: true, MinRooms: 1, MaxRooms: 1, MinMessages: 4, MaxMessages: 8}, NoDoublePost, "replies with key", 2},
		{"interrupt ignored", defects{ignoreInterrupt: true}, replies, InterruptSilence, "sent after the interrupt", 91},
		{"stop ignored", defects{ignoreStop: true}, replies, StopSilence, "after its stop reached the agent", 2},
		{"interrupted cycle left for replay", defects{replayInterrupt: true}, replies, InterruptConsumes, "must be consumed, not left for replay", 91},
		{"supersede ignored", defects{ignoreSupersede: true}, replies, SupersedeStops, "kept working after it was superseded", 29},
		{"POST re-sent after a 5xx", defects{resendOn5xx: true}, replies, NoDoublePost, "replies with key", 16},
		{"room read before the send settled", defects{readUnsettled: true}, replies, NoDoublePost, "replies with key", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Agent: restAgent(tc.defect)}
			cfg := RunConfig{Seed: 1, Schedules: 400, Gen: tc.gen, Engine: opts}
			if raceEnabled {
				cfg.Seed, cfg.Schedules = tc.first, 1
			}
			rep := Run(t, cfg)
			require.False(t, rep.Held, "the prover must fail this agent")
			require.NotNil(t, rep.First)
			assert.Equal(t, tc.first, rep.First.Seed, "the first of seeds 1 to 400 that catches it")
			assert.Equal(t, tc.want, rep.First.Invariant)
			assert.Contains(t, rep.First.Reason, tc.reason)
			assert.Contains(t, rep.FinalLine(), "did NOT hold")
			assert.LessOrEqual(t, len(rep.First.Witness), 8, "a short witness: %v", rep.First.Witness)
			assert.Less(t, len(rep.First.Witness), rep.First.WitnessOf+1)

			// The witness replays, and every event in it is needed.
			bad := Random(rep.First.Seed, tc.gen)
			small, res := Shrink(t, bad, opts, tc.want, 0)
			require.NotNil(t, res.Violation)
			require.Equal(t, tc.want, res.Violation.Invariant)
			for i := range small.Events {
				c := small.clone()
				c.Events = append(c.Events[:i], c.Events[i+1:]...)
				r := Simulate(t, c, opts)
				assert.False(t, r.Violation != nil && r.Violation.Invariant == tc.want,
					"dropping %q from the witness still fails: not minimal", small.Events[i])
			}
		})
	}
}

// The same hand-made loop with no defect passes: the oracle does not
// fail a correct agent that is not the Shell.
func TestCorrectHandMadeLoopPasses(t *testing.T) {
	rep := Run(t, RunConfig{Seed: 7, Schedules: 150, Gen: GenOptions{RepliesOnly: true, NoJoins: true}, Engine: Options{Agent: restAgent(defects{})}})
	require.True(t, rep.Held, "first violation: %+v", rep.First)
	assert.Equal(t, 150, rep.Schedules)
	assert.Positive(t, rep.Faults["kill_after_apply"]+rep.Faults["kill_before_send"])
	assert.Positive(t, rep.Faults["interrupt"])
	assert.Positive(t, rep.Faults["stop"])
}
