package killtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A starved lease's warnings are what a busy machine makes the agent
// say; anything else on stderr is kept, line for line.
func TestOnlyALeasesWarningsAreNotAlarming(t *testing.T) {
	stderr := "time=1 level=WARN msg=\"pgledger: lease renewal failed; retrying while it lasts\"\n" +
		"time=2 level=WARN msg=\"bandonce: handler failed; the message will be retried\"\n" +
		"time=3 level=WARN msg=\"pgledger: lease lost; stopping the leader\"\n" +
		"panic: boom"
	assert.Equal(t, "time=2 level=WARN msg=\"bandonce: handler failed; the message will be retried\"\npanic: boom", alarming(stderr))
	assert.Empty(t, alarming(""))
}
