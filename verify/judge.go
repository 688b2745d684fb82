package verify

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// hangGrace is how long (virtual time) a handler may keep running after its
// context ended before the verifier calls it stuck, besides the time it
// waited on a request of its turn already in flight then (of m.Send,
// m.Event, an agent-API write): the Shell lets such a request end, since
// a POST cannot be taken back and the turn must learn whether it landed.
const hangGrace = time.Second

// verdict is one violation: kind names the defect class (stable, so the
// shrinker keeps the same defect), reason says it in one clause.
type verdict struct {
	kind   string
	reason string
}

// judge decides one run: the verifier's own checks first, since they name
// the defect most precisely (a post Band refused before all), then the
// engine's oracle.
func judge(cfg *config, res proof.Result, o *observation) *verdict {
	if v := rejectedByBand(o); v != nil {
		return v
	}
	for _, check := range []func(*observation) *verdict{
		failedAfterReply, keyChanged, missingMarker, keyShared, effectTwice,
		workAfterCancel, sentAfterSignal, effectWithoutKey, stepRanAgain, handlerHung, callHung,
	} {
		if v := check(o); v != nil {
			return v
		}
	}
	if v := effectKeysUnstable(o, landedKeys(res)); v != nil {
		return v
	}
	if v := keyReused(o); v != nil {
		return v
	}
	if v := eventTwice(o, res); v != nil {
		return v
	}
	if v := bandEffectTwice(o, res); v != nil {
		return v
	}
	if v := noticeForAnswered(o, res); v != nil {
		return v
	}
	if v := shownTwice(o, res); v != nil {
		return v
	}
	if v := controlNotRejoined(o); v != nil {
		return v
	}
	if v := workAfterReturn(o); v != nil {
		return v
	}
	if v := gapVerdict(cfg, res, o); v != nil {
		return v
	}
	return fromOracle(cfg, res, o)
}

// workAfterReturn: a life sent a request after its agent function had
// returned, so the function returned while work of it still ran (a
// room's goroutine, a turn left to finish): a supervisor that starts the
// next instance then has two at work.
func workAfterReturn(o *observation) *verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.afterReturn) == 0 {
		return nil
	}
	a := o.afterReturn[0]
	what := string(a.ep)
	if what == "" {
		what = "a request"
	}
	return &verdict{"work-after-return", fmt.Sprintf(
		"work left running: life %d sent %s after the agent returned, so its rooms went on without it: "+
			"cancel every goroutine it started and wait for them before returning (after a supersede too)", a.life, what)}
}

func failedAfterReply(o *observation) *verdict {
	o.mu.Lock()
	failed := oracle.FailedAfterReply(o.sightings)
	o.mu.Unlock()
	if len(failed) == 0 {
		return nil
	}
	return &verdict{"failed-after-reply", fmt.Sprintf(
		"a failed acknowledgement became a failure: %s was marked failed after its reply was posted",
		o.label(failed[0]))}
}

func keyChanged(o *observation) *verdict {
	for _, id := range sortedKeys(o.keys) {
		if ks := withMarker(o.keys[id]); len(ks) > 1 {
			return &verdict{"key-changed", fmt.Sprintf(
				"the dedup key changed between deliveries of %s (%q, then %q), so the guard cannot recognise its own reply: "+
					"derive the key from the message (its ID, a natural key in its text), never from a model's output, the attempt or the clock",
				o.label(id), ks[0], ks[1])}
		}
	}
	return nil
}

func withMarker(keys []string) []string {
	var out []string
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

func missingMarker(o *observation) *verdict {
	for _, id := range sortedKeys(o.keys) {
		for _, k := range o.keys[id] {
			if k == "" {
				return &verdict{"no-marker", fmt.Sprintf(
					"the reply to %s carried no [dedup_key:...] marker, so no guard can find it", o.label(id))}
			}
		}
	}
	return nil
}

func keyShared(o *observation) *verdict {
	owner := map[string]string{}
	for _, id := range sortedKeys(o.keys) {
		for _, k := range withMarker(o.keys[id]) {
			if first, ok := owner[k]; ok && first != id {
				a, b := o.label(first), o.label(id)
				if a > b {
					a, b = b, a
				}
				return &verdict{"key-shared", fmt.Sprintf(
					"the dedup key is too coarse: %s and %s share the key %q, so one of them goes unanswered", a, b, k)}
			}
			owner[k] = id
		}
	}
	return nil
}

func effectTwice(o *observation) *verdict {
	calls, effects := o.world.snapshot()
	for _, k := range sortedKeys(effects) {
		if n := effects[k]; n > 1 {
			if a, b, ok := twoIdempotencyKeys(calls, k); ok {
				return &verdict{"effect-twice", fmt.Sprintf(
					"a non-idempotent side effect: the effect %q was performed %d times, under the idempotency keys %q and %q: the key handed to the system is not stable across deliveries (take it from Message.Step)", k, n, a, b)}
			}
			return &verdict{"effect-twice", fmt.Sprintf(
				"a non-idempotent side effect: the effect %q was performed %d times%s", k, n, o.twiceHint(calls, k))}
		}
	}
	return nil
}

// twiceHint names the fix for an effect performed twice, by who
// performed it: two messages (a key too coarse), one delivery, or several
// deliveries of one message.
func (o *observation) twiceHint(calls []effectCall, key string) string {
	var turns []*turn
	for _, c := range calls {
		if c.key == key && c.outcome == outcomePerformed {
			turns = append(turns, c.turn)
			if c.idempotencyKey == "" && o.inStep(c) {
				return ", inside a Message.Step whose record the next life did not have (a MemoryLedger is lost with the process): " +
					"hand the step's idempotency key to the system (External.EffectOnce), or use a durable Ledger"
			}
		}
	}
	if len(turns) < 2 || turns[0] == nil || turns[1] == nil {
		return ": ask External.Performed (or run the effect as a Message.Step) before performing it, so a redelivery does not do it again"
	}
	switch {
	case turns[0].hook || turns[1].hook:
		return ", from a hook, which runs again for a message delivered again: ask External.Performed first, or perform it in the handler, as a Message.Step"
	case turns[0].msg != turns[1].msg:
		return ", by two messages: a key names one message's unit of work (put the message's ID in it)"
	case turns[0] == turns[1]:
		return ", by one delivery: the handler performs it again itself (a retry loop that does not check, or two calls)"
	}
	return ", by two deliveries of one message: ask External.Performed (or run the effect as a Message.Step) before performing it, so a redelivery does not do it again"
}

// inStep reports whether the call c was made while a step's fn ran for
// its message.
func (o *observation) inStep(c effectCall) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.turn == nil {
		return false
	}
	for _, sp := range o.steps {
		if sp.msg == c.turn.msg && sp.start <= c.begin && (sp.end == 0 || c.begin <= sp.end) {
			return true
		}
	}
	return false
}

// twoIdempotencyKeys returns two distinct idempotency keys under which
// the effect named by key was performed, if there are two.
func twoIdempotencyKeys(calls []effectCall, key string) (a, b string, ok bool) {
	for _, c := range calls {
		if c.key != key || c.outcome != outcomePerformed || c.idempotencyKey == "" {
			continue
		}
		switch {
		case a == "":
			a = c.idempotencyKey
		case c.idempotencyKey != a:
			return a, c.idempotencyKey, true
		}
	}
	return "", "", false
}

func workAfterCancel(o *observation) *verdict {
	calls, _ := o.world.snapshot()
	for _, c := range calls {
		if c.outcome != outcomeRefused {
			continue
		}
		return &verdict{"work-after-cancel", fmt.Sprintf(
			"work went on %s: the effect %q was started after its context was cancelled (%s)", cancelledBy(c.cause), c.key, causeName(c.cause))}
	}
	return nil
}

// cancelledBy says what a cancellation cause means for the work.
func cancelledBy(cause error) string {
	switch {
	case errors.Is(cause, bandonce.ErrInterrupted):
		return "after an interrupt"
	case errors.Is(cause, bandonce.ErrStopped):
		return "in a stopped room"
	case errors.Is(cause, bandonce.ErrSuperseded):
		return "after the agent was superseded"
	case errors.Is(cause, bandonce.ErrShutdown):
		return "after the shutdown"
	}
	return "after its context ended"
}

func handlerHung(o *observation) *verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range o.handlers {
		if h.cancelled.IsZero() {
			continue
		}
		end := h.end
		if !h.returned {
			end = time.Now()
		}
		if late := end.Sub(h.cancelled); late > hangGrace+h.waitedAfter(h.cancelled, end) {
			label := o.labels[h.msg]
			if label == "" {
				label = h.msg
			}
			return &verdict{"handler-hung", fmt.Sprintf(
				"the handler for %s kept running %s after its context was cancelled (%s): it blocks without honouring its context",
				label, late.Round(time.Millisecond), causeName(h.cause))}
		}
	}
	return nil
}

func causeName(err error) string {
	if err == nil {
		return "cancelled"
	}
	return strings.TrimPrefix(err.Error(), "bandonce: ")
}

func callHung(o *observation) *verdict {
	calls, _ := o.world.snapshot()
	for _, c := range calls {
		if c.hang && c.uncancellable {
			return &verdict{"call-hung", fmt.Sprintf(
				"the effect %q was called with a context that nothing can cancel and hung: no interrupt, stop or shutdown can reach that work", c.key)}
		}
	}
	return nil
}

// fromOracle names the defect behind the engine's violation.
func fromOracle(cfg *config, res proof.Result, o *observation) *verdict {
	v := res.Violation
	if v == nil {
		return nil
	}
	what := map[proof.Invariant]string{
		proof.NoDoublePost:     "a double post",
		proof.NonePending:      "a lost message",
		proof.OneOutcome:       "a wrong outcome",
		proof.AbortsUncharged:  "a charged abort",
		proof.InterruptSilence: "work after an interrupt",
		proof.StopSilence:      "work in a stopped room",
		proof.AgentLifecycle:   "a lifecycle fault",
		proof.Quiet:            "a stalled room",
	}[v.Invariant]
	switch {
	case v.Invariant == proof.OneOutcome && strings.Contains(v.Reason, "without its reply"):
		what = "a lost reply"
		if hint := quotedKey(res.Schedule, strings.Fields(v.Reason)[0]); hint != "" {
			return &verdict{"oracle:" + string(v.Invariant), what + ": " + v.Reason + "; " + hint}
		}
	case v.Invariant == proof.InterruptSilence || v.Invariant == proof.StopSilence:
		kind := proof.Interrupt
		if v.Invariant == proof.StopSilence {
			kind = proof.Stop
		}
		if room, msg := saidBy(res, strings.TrimSuffix(strings.Fields(v.Reason)[0], "'s")); msg != "" {
			what += ": " + v.Reason + signalHint(res, o, room, msg, kind)
			return &verdict{"oracle:" + string(v.Invariant), what}
		}
	case v.Invariant == proof.NonePending && res.Violations[proof.Quiet] > 0:
		return &verdict{"oracle:" + string(proof.Quiet), "a stalled room: " + v.Reason + ", and the system never went quiet"}
	}
	if what == "" {
		what = string(v.Invariant)
	}
	return &verdict{"oracle:" + string(v.Invariant), what + ": " + v.Reason}
}

// saidBy finds the room and id of the message a label names.
func saidBy(res proof.Result, label string) (room, msg string) {
	for _, s := range res.Said {
		if s.Label == label {
			return s.RoomID, s.ID
		}
	}
	return "", ""
}

// notes lists, sorted, the run's remarks on what it could not exercise.
func (o *observation) sortedNotes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.notes))
	for n := range o.notes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// quotedKey explains a lost reply whose natural key appears in a human's
// message of the room (its own request quotes it, or a longer key contains
// it): a guard that matches substrings takes that message for the reply.
func quotedKey(s *proof.Schedule, label string) string {
	if s == nil {
		return ""
	}
	key, room := "", 0
	for _, e := range s.Events {
		if e.Kind == proof.Say && e.Spec.Label == label {
			key, room = e.Spec.Key, e.Room
		}
	}
	if key == "" {
		return ""
	}
	for _, e := range s.Events {
		if e.Kind == proof.Say && e.Room == room && strings.Contains(e.Spec.String(), key) {
			return fmt.Sprintf("its key %q appears in the text of %s, which a guard matching substrings takes for the reply", key, e.Spec.Label)
		}
	}
	return ""
}
