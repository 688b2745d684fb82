package proof

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

func deadLetter(events ...Event) *Schedule {
	s := &Schedule{Seed: 5, Rooms: 1, Events: []Event{{Kind: Say, Spec: MessageSpec{Label: "r1m1", Outcome: AlwaysFail}}}}
	s.Events = append(s.Events, events...)
	return s
}

func errorEvents(res Result) []fakeband.ChatEvent {
	var out []fakeband.ChatEvent
	for _, room := range res.Events {
		for _, e := range room {
			if e.MessageType == string(bandonce.EventError) {
				out = append(out, e)
			}
		}
	}
	return out
}

func TestTheShellTellsTheRoomOfADeadLetterOnce(t *testing.T) {
	for name, sched := range map[string]*Schedule{
		"plain":                    deadLetter(),
		"killed after the event":   deadLetter(Event{At: 1, Kind: KillAfter, Endpoint: fakeband.EndpointEvent}),
		"the event's answer lost":  deadLetter(Event{At: 1, Kind: LoseResponse, Endpoint: fakeband.EndpointEvent}),
		"killed before the event":  deadLetter(Event{At: 1, Kind: KillBefore, Endpoint: fakeband.EndpointEvent}),
		"killed after the consume": deadLetter(Event{At: 2, Kind: KillAfter, Endpoint: fakeband.EndpointProcessed}),
	} {
		t.Run(name, func(t *testing.T) {
			res := Simulate(t, sched, Options{})
			require.Nil(t, res.Violation)
			require.Len(t, errorEvents(res), 1)
			assert.Equal(t, bandonce.NoticeKey(res.Said[0].ID), noticeKey(errorEvents(res)[0]))
			assert.Positive(t, res.Checks[OneOutcome])
		})
	}
}

func TestADeadLetterTheRoomIsNotToldOfIsAViolation(t *testing.T) {
	res := Simulate(t, deadLetter(), Options{DeadLettersTold: true, Agent: ShellAgent(ShellConfig{
		DeadLetterNotice: func(bandonce.DeadLetter) string { return "" },
	})})
	require.NotNil(t, res.Violation)
	assert.Equal(t, OneOutcome, res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "without a word to its room")
}

// A durable ledger must keep every dead letter for an operator's replay:
// one whose Shell gave a message up without keeping it fails.
func TestADeadLetterTheLedgerDoesNotKeepIsAViolation(t *testing.T) {
	s := deadLetter()
	s.Durable = true
	res := Simulate(t, s, Options{})
	require.Nil(t, res.Violation, "the Shell keeps it")
	res = Simulate(t, s, Options{DeadLettersTold: true, Agent: ShellAgent(ShellConfig{forgetDeadLetters: true})})
	require.NotNil(t, res.Violation)
	assert.Equal(t, OneOutcome, res.Violation.Invariant)
	assert.Contains(t, res.Violation.Reason, "r1m1 was given up on, but its dead letter is not kept for a replay")
}
