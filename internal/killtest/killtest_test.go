package killtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A starved lease's warnings, and the ledger calls it failed, are what a
// busy machine makes the agent say; anything else on stderr is kept, line
// for line.
func TestOnlyALeasesWarningsAreNotAlarming(t *testing.T) {
	stderr := "time=1 level=WARN msg=\"pgledger: lease renewal failed; retrying while it lasts\"\n" +
		"time=2 level=WARN msg=\"bandonce: handler failed; the message will be retried\"\n" +
		"time=3 level=WARN msg=\"pgledger: lease lost; stopping the leader\"\n" +
		"time=4 level=ERROR msg=\"bandonce: ledger write failed; not sending\" key=k err=\"pgledger: set key intent \\\"k\\\" in room \\\"r\\\": timeout: context deadline exceeded\"\n" +
		"time=5 level=ERROR msg=\"bandonce: ledger write failed\" message=m err=\"pgledger: clear ack-pending for agent \\\"a\\\" refused under lease epoch 2: the lease ran out by this process's clock\"\n" +
		"time=6 level=ERROR msg=\"bandonce: ledger read failed\" message=m err=\"boom\"\n" +
		"time=7 level=WARN msg=\"bandonce: handler failed; the message will be retried\" err=\"band: POST /agent/chats/{id}/tasks/{task_id}: pgledger: POST /tasks/1 for agent \\\"a\\\" refused under lease epoch 2: the lease is no longer held\"\n" +
		"panic: boom"
	assert.Equal(t, "time=2 level=WARN msg=\"bandonce: handler failed; the message will be retried\"\n"+
		"time=6 level=ERROR msg=\"bandonce: ledger read failed\" message=m err=\"boom\"\npanic: boom", alarming(stderr))
	assert.Empty(t, alarming(""))
}
