package verify

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quick is how many schedules a check runs in the tests of one agent,
// broken or correct: the first quick schedules of the default run (a
// schedule's seed is the master seed plus its index, whatever the count),
// so an agent caught here is caught at the default settings, and one that
// passes here passes those schedules. The default's full count runs in
// TestTheReferenceAgentPassesEveryCheck and
// TestEveryCheckExercisesWhatItSays; under the race detector each
// schedule costs tenfold, and the suite must finish on a loaded machine.
const quick = 3

// quickly is opts after Schedules(quick), so that an agent's own
// Schedules or Seed still wins.
func quickly(opts ...Option) []Option {
	return append([]Option{Schedules(quick)}, opts...)
}
