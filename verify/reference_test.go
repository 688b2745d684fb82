package verify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheReferenceAgentPassesEveryCheck(t *testing.T) {
	start := time.Now()
	res := ExactlyOnce(t, ReferenceAgent())
	elapsed := time.Since(start)
	t.Logf("ExactlyOnce(ReferenceAgent): %d schedules in %s", res.Schedules, elapsed)
	require.True(t, res.OK, "%s\n%v", res.Reason, res.Witness)
}
