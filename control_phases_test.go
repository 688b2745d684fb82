package bandonce_test

// Every phase of a message's passage has a defined outcome for every
// signal (issue 3, item 6; review finding (e); gaps G1, G2). The phase's
// request is held ten seconds by a Delay fault while the signal lands.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// phase is a moment of one message's cycle, and how to hold it.
type phase struct {
	name        string
	hold        fakeband.Endpoint // the request held while the signal lands; "" holds nothing
	work        time.Duration     // how long the handler works
	loadContext bool              // the handler reads the room's context first, as a tool would
	customKey   bool              // the reply has its own key, so the guard reads the room before posting
}

// expectation is where the message stands once the signal has landed.
type expectation struct {
	calls    int // handler calls
	replies  int
	status   string
	outcomes []bandonce.OutcomeKind
}

// The three signals: an interrupt, a stop with Band's gate behind it, and
// a stop whose push arrives without the gate (Band's pushes lag its
// gate; this is the shell's own flag alone).
const (
	sigInterrupt = "interrupt"
	sigStop      = "stop"
	sigLocalStop = "local-stop"
)

func TestEveryPhaseHasADefinedOutcome(t *testing.T) {
	interrupted := expectation{status: fakeband.StatusProcessed, outcomes: []bandonce.OutcomeKind{bandonce.Interrupted}}
	left := expectation{status: fakeband.StatusProcessing, outcomes: []bandonce.OutcomeKind{bandonce.Stopped}}
	replied := expectation{calls: 1, replies: 1, status: fakeband.StatusProcessed, outcomes: []bandonce.OutcomeKind{bandonce.Replied}}
	ran := func(e expectation) expectation { e.calls = 1; return e }

	cases := []struct {
		phase phase
		want  map[string]expectation
	}{
		{ // G1, G2: the signal lands while /next is fetching the message.
			// A cycle begins when /next serves a message ("arm at
			// dequeue"): an interrupt before that finds no turn in flight
			// and must not consume a message that may postdate it.
			phase{name: "during next", hold: fakeband.EndpointNext},
			map[string]expectation{
				sigInterrupt: replied,
				// The gate is closed by the time /next is served: 204.
				sigStop: {status: fakeband.StatusDelivered},
				// Stopped while /next was in flight: the message it
				// served is not even claimed.
				sigLocalStop: {status: fakeband.StatusDelivered},
			},
		},
		{ // Review finding (e): the claim window.
			phase{name: "during processing", hold: fakeband.EndpointProcessing},
			map[string]expectation{sigInterrupt: interrupted, sigStop: left, sigLocalStop: left},
		},
		{ // G1: the context a tool reads, while the handler waits for it.
			phase{name: "while the context loads", hold: fakeband.EndpointContext, loadContext: true},
			map[string]expectation{sigInterrupt: ran(interrupted), sigStop: ran(left), sigLocalStop: ran(left)},
		},
		{
			phase{name: "while the handler runs", work: 10 * time.Second},
			map[string]expectation{sigInterrupt: ran(interrupted), sigStop: ran(left), sigLocalStop: ran(left)},
		},
		{ // The handler has returned; its reply is not sent yet.
			phase{name: "while the guard reads the room", hold: fakeband.EndpointContext, customKey: true},
			map[string]expectation{sigInterrupt: ran(interrupted), sigStop: ran(left), sigLocalStop: ran(left)},
		},
		{ // Sent is sent; but Band's gate refuses a post that reaches it
			// after the stop (G5): that is a stop too.
			phase{name: "during the post", hold: fakeband.EndpointPost},
			map[string]expectation{sigInterrupt: replied, sigStop: ran(left), sigLocalStop: replied},
		},
		{
			phase{name: "during the ack", hold: fakeband.EndpointProcessed},
			map[string]expectation{sigInterrupt: replied, sigStop: replied, sigLocalStop: replied},
		},
	}
	for _, c := range cases {
		for _, sig := range []string{sigInterrupt, sigStop, sigLocalStop} {
			t.Run(c.phase.name+"/"+sig, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					checkPhase(t, c.phase, sig, c.want[sig])
				})
			})
		}
	}
}

func checkPhase(t *testing.T, p phase, sig string, want expectation) {
	r := newRig(t, 1, p.work)
	r.h.loadContext = p.loadContext
	if p.customKey {
		r.h.dedupKey = func(id string) string { return "work:" + id }
	}
	room := r.rooms[0]
	id := r.say(room, "the message")
	if p.hold != "" {
		r.band.Inject(fakeband.Fault{Endpoint: p.hold, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
	}
	stop := r.run(nil)
	if p.hold != "" {
		require.Equal(t, 1, r.band.FaultsFired()[string(p.hold)+"/delay"], "the signal lands while the request is held")
	}
	switch sig {
	case sigInterrupt:
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
	case sigStop:
		require.NoError(t, r.band.StopRoom(room.ID))
	case sigLocalStop:
		r.tap.signal("stop", "room", room.ID, "")
	}
	time.Sleep(30 * time.Second)

	key := bandonce.DefaultKey(id)
	if p.customKey {
		key = "work:" + id
	}
	assert.Equal(t, want.calls, r.h.callsOf(id), "handler calls")
	assert.Equal(t, want.replies, r.repliesTo(room, key), "replies")
	assert.Equal(t, want.status, r.band.Status(r.agent.ID, id), "status")
	assert.Equal(t, want.outcomes, r.out.of(id), "outcomes")

	// Whatever the phase, once played the message ends exactly
	// once: answered, unless an interrupt consumed it.
	r.h.setWork(0)
	switch sig {
	case sigStop:
		require.NoError(t, r.band.PlayRoom(room.ID))
	case sigLocalStop:
		r.tap.signal("play", "room", room.ID, "")
	}
	time.Sleep(30 * time.Second)
	require.NoError(t, stop())
	assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id), "processed in the end")
	if sig == sigInterrupt && want.replies == 0 {
		assert.Zero(t, r.repliesTo(room, key), "an interrupt is never answered later")
	} else {
		assert.Equal(t, 1, r.repliesTo(room, key), "answered exactly once in the end")
	}
}
