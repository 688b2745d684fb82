package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/proof"
)

// This file holds correct agents the verifier once failed: each is a
// regression test of a false red.

// once performs the effect named by key unless it was already performed,
// as a correct agent does with any effect of its own.
func once(ctx context.Context, key string) error {
	if x := ExternalFrom(ctx); x.Performed(key) == 0 {
		return x.Effect(ctx, key)
	}
	return nil
}

// stepThenNotify is a correct turn: a journaled refund, then an
// idempotent notification that the external system may fail. The
// redelivery after the failure skips the recorded step, so its first
// effect is the notification.
func stepThenNotify(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if _, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) { return refund(ctx, m, key) }); err != nil {
		return nil, err
	}
	if err := once(ctx, "notify:"+m.ID); err != nil {
		return nil, err
	}
	return reply(m, ""), nil
}

func TestARecordedStepSkippedAtARedeliveryDoesNotShiftTheKeysOfLaterEffects(t *testing.T) {
	m := newMockT(t)
	res := HandlerErrors(m, Shell(stepThenNotify))
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

// twoEffects is a correct turn with two idempotent effects, each of
// which the external system may fail.
func twoEffects(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	for _, key := range []string{"notify:" + m.ID, "audit:" + m.ID} {
		if err := once(ctx, key); err != nil {
			return nil, err
		}
	}
	return reply(m, ""), nil
}

func TestFailureBudgetsArePerMessageNotPerEffectKey(t *testing.T) {
	m := newMockT(t)
	res := HandlerErrors(m, Shell(twoEffects))
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

func TestEveryCheckPassesTheCorrectTurnsThatOnceFailed(t *testing.T) {
	for name, h := range map[string]bandonce.Handler{"step then notify": stepThenNotify, "two effects": twoEffects} {
		t.Run(name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, Shell(h), quickly()...)
			require.True(t, res.OK, "%s: %s\n%s", res.Check, res.Reason, strings.Join(res.Witness, "\n"))
		})
	}
}

// slowTurn is a correct turn that waits more than a minute on its model,
// honouring its context: a stall of a minute without a mark or a post is
// not a stalled room.
func slowTurn(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	if err := idempotent(ctx, m); err != nil {
		return nil, err
	}
	pause(ctx, 70*time.Second)
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return reply(m, ""), nil
}

func TestATurnThatTakesMoreThanAMinuteIsNotAStalledRoom(t *testing.T) {
	m := newMockT(t)
	res := KillBeforePost(m, Shell(slowTurn))
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

// oneKeyOfEachKind is a correct turn that names its unit of work once and
// gives that one key to a progress event, a memory and the reply: each
// kind keeps its keys apart, so none hides another.
func oneKeyOfEachKind(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	key := "work:" + m.ID
	if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "working on it", DedupKey: key}); err != nil {
		return nil, err
	}
	if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: "asked: " + m.Body(), System: "long_term", Type: "episodic",
		Segment: "user", Thought: "to recall it", SubjectID: m.SenderID, DedupKey: key}); err != nil {
		return nil, err
	}
	rep := reply(m, "")
	rep.DedupKey = key
	return rep, nil
}

func TestOneKeyOnAnEventAMemoryAndTheReplyLosesNothing(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, Shell(oneKeyOfEachKind))
	require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

// A correct agent answers a message under the natural key its text
// carries ("choose a natural key when two messages are the same work",
// docs/how-it-works.md; the storm draws such keys, nk:r1:a). An
// interrupt reached the agent earlier, in the turn of the room's message
// before (which it consumed). interruptKept takes a message for answered
// only when a posted marker contains the message's id, so it calls the
// message answered under its natural key "consumed without its reply",
// an interrupt "kept for later": a false red. The oracle itself (and
// keyOf) go by the key the agent sent for the message.
func TestAMessageAnsweredUnderItsNaturalKeyIsNotAnInterruptKeptForLater(t *testing.T) {
	const room, m0, m1 = "room-1", "0000aaaa-0000-0000-0000-000000000001", "0000aaaa-0000-0000-0000-000000000002"
	o := newObservation(externalPlan{})
	o.askedAt[lifeMessage{1, m0}] = []int64{1} // r1m0 served, then interrupted at tick 3
	o.askedAt[lifeMessage{1, m1}] = []int64{5} // r1m1 served after that
	o.keys[m1] = []string{"nk:r1:a"}
	o.labels[m0], o.labels[m1] = "r1m0", "r1m1"
	res := proof.Result{
		Interrupted: 1,
		Found:       map[proof.Invariant]*proof.Violation{},
		Posts:       [][]fakeband.Post{{{Seq: 9, RoomID: room, Content: "done: r1m1 reply key=a\n[dedup_key:nk:r1:a]"}}},
		Said:        []proof.Said{{ID: m0, RoomID: room, Label: "r1m0"}, {ID: m1, RoomID: room, Label: "r1m1"}},
		Schedule: &proof.Schedule{Rooms: 1, Events: []proof.Event{
			{Kind: proof.Say, Spec: proof.MessageSpec{Label: "r1m0", Outcome: proof.Reply}},
			{Kind: proof.Say, Spec: proof.MessageSpec{Label: "r1m1", Outcome: proof.Reply, Key: "nk:r1:a"}},
		}},
		Signals: []proof.Signal{{Kind: proof.Interrupt, RoomID: room, Reached: true, Life: 1, Tick: 3}},
	}
	v := interruptKept(newConfig(nil), res, o)
	assert.Nil(t, v, "r1m1 was answered, under its natural key")
}

// A handler waiting in its own m.Send or m.Event when a stop or an
// interrupt comes waits for the POST that left (the Shell cannot take it
// back, and the turn must learn whether it landed): up to the request
// timeout, not a handler that ignores its context. At storm seed 1273
// toolTurn's progress message is answered 6.4 s late and the room stopped
// meanwhile; at 5113 oneKeyOfEachKind's event is cut by an interrupt.
func TestAHandlerWaitingOnItsOwnSendAfterASignalIsNotHung(t *testing.T) {
	for _, c := range []struct {
		name string
		h    bandonce.Handler
		seed int64
	}{{"send", toolTurn, 1273}, {"event", oneKeyOfEachKind, 5113}} {
		t.Run(c.name, func(t *testing.T) {
			m := newMockT(t)
			res := Storm(m, Shell(c.h), Schedules(1), Seed(c.seed))
			require.True(t, res.OK, "%s\n%s", res.Reason, strings.Join(res.Witness, "\n"))
			assert.Empty(t, m.Errors())
		})
	}
}

// The grace for a request in flight is only for one that was: a handler
// that made none and ignores its context for 2.5 s is hung; one that
// waited 2 s of them on its turn's request sent before the interrupt is
// not.
func TestOnlyARequestInFlightAtTheCancellationEarnsMoreGrace(t *testing.T) {
	start := time.Now()
	call := func(requests ...*span) *observation {
		o := newObservation(externalPlan{})
		o.handlers = append(o.handlers, &handlerCall{life: 1, room: "room-1", msg: "m1", start: start,
			cancelled: start.Add(time.Second), cause: bandonce.ErrInterrupted,
			returned: true, end: start.Add(3500 * time.Millisecond), turn: &turn{inFlight: requests}})
		return o
	}
	assert.NotNil(t, handlerHung(call()), "2.5 s past its cancellation with nothing in flight")
	assert.NotNil(t, handlerHung(call(&span{start: start.Add(1100 * time.Millisecond), end: start.Add(3 * time.Second)})),
		"a request sent after the cancellation earns nothing")
	assert.Nil(t, handlerHung(call(&span{start: start.Add(500 * time.Millisecond), end: start.Add(3 * time.Second)})),
		"2 s of the 2.5 waited on a request sent before")
}
