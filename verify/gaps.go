package verify

import (
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/band-once/bandonce/proof"
)

// gapVerdict runs the judges of the widened fault model: the agent's
// socket, the side effects of each delivery, and the engine's verdicts
// that need the verifier's records to name their defect.
func gapVerdict(cfg *config, res proof.Result, o *observation) *verdict {
	for _, check := range []func(*config, proof.Result, *observation) *verdict{
		neverConnected, effectKeyChanged, effectKeyTaken, stateSurvived, effectAfterSignal, effectOutlived, effectLost, interruptKept, oracleGaps,
	} {
		if v := check(cfg, res, o); v != nil {
			return v
		}
	}
	return nil
}

// signalled reports whether the schedule sent the agent a control signal
// or had a newer connection take over.
func signalled(res proof.Result, o *observation) bool {
	if res.Schedule != nil {
		for _, e := range res.Schedule.Events {
			switch e.Kind {
			case proof.Interrupt, proof.Stop, proof.Play, proof.Supersede:
				return true
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.supersede != nil
}

// neverConnected: an agent that did not declare NoControlSignals but never
// asked for a socket cannot hear interrupt, stop, play or supersede, and
// every control check would pass it vacuously.
func neverConnected(cfg *config, res proof.Result, o *observation) *verdict {
	if cfg.noControl || res.Sockets > 0 || res.Lives == 0 || !signalled(res, o) {
		return nil
	}
	return &verdict{"no-socket", "the agent never tried to open a socket, so no interrupt, stop, play or supersede could reach it: " +
		"connect one, or declare NoControlSignals() if it runs without"}
}

// turnsByMessage groups the turns by message, in the order they began.
func (o *observation) turnsByMessage() map[string][]*turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]*turn{}
	for _, t := range o.turns {
		out[t.msg] = append(out[t.msg], t)
	}
	for _, ts := range out {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].start < ts[j].start })
	}
	return out
}

// effectKeyChanged: a later delivery of a message performed an effect
// under a key no earlier delivery called, while an effect an earlier
// delivery performed went unrecognised by it: neither asked about, nor
// called again, nor skipped as part of a step whose record it read. The
// key is not stable across deliveries (a per-process or per-attempt part
// in it), so an idempotency check under it cannot recognise the effect
// already done, and it is done again.
func effectKeyChanged(_ *config, _ proof.Result, o *observation) *verdict {
	calls, _ := o.world.snapshot()
	byTurn := map[*turn][]effectCall{}
	for _, c := range calls {
		if c.turn != nil {
			byTurn[c.turn] = append(byTurn[c.turn], c)
		}
	}
	byMsg := o.turnsByMessage()
	for _, msg := range sortedKeys(byMsg) {
		var earlier []effectCall // performed by the deliveries before
		called := map[string]bool{}
		for _, t := range byMsg[msg] {
			fresh := ""
			for _, c := range byTurn[t] {
				if c.outcome == outcomePerformed && !called[c.key] {
					fresh = c.key
					break
				}
			}
			if fresh != "" {
				for _, c := range earlier {
					if !touchedAny(o, t, []string{c.key}) && !o.recalledBy(t, c) {
						return &verdict{"effect-key-changed", fmt.Sprintf(
							"the effect key changed between deliveries of %s (%q, then %q): the later delivery could not recognise the effect already performed, so it was performed again under a new key: "+
								"derive the key from the message (its ID, a natural key in its text), never from a model's output, the attempt, the process or the clock",
							o.label(msg), c.key, fresh)}
					}
				}
			}
			for _, c := range byTurn[t] {
				called[c.key] = true
				if c.outcome == outcomePerformed {
					earlier = append(earlier, c)
				}
			}
		}
	}
	return nil
}

// effectKeyTaken: an effect one message's turn performed was asked about
// or called by a turn of another message, which took it for its own: the
// key names more than one message's unit of work, so the second message's
// effect is lost (a tool call's id, numbered from zero in every response,
// is such a key). MayPerformNoEffect lifts it, as it lifts effectMissing:
// an agent that does some work once per room or per person says so.
func effectKeyTaken(cfg *config, _ proof.Result, o *observation) *verdict {
	if cfg.noEffect {
		return nil
	}
	calls, _ := o.world.snapshot()
	o.mu.Lock()
	turns := append([]*turn(nil), o.turns...)
	o.mu.Unlock()
	for _, c := range calls {
		if c.outcome != outcomePerformed || c.turn == nil {
			continue
		}
		for _, u := range turns {
			if u.msg == c.turn.msg || !touchedAny(o, u, []string{c.key}) {
				continue
			}
			return &verdict{"effect-key-shared", fmt.Sprintf(
				"a lost effect: %s's turn performed the effect %q, and a turn of %s asked about the same key and took it for its own: "+
					"a key names one message's unit of work (put the message's ID in it; a model's tool call ids restart at call_0 in every response)",
				o.label(c.turn.msg), c.key, o.label(u.msg))}
		}
	}
	return nil
}

// stateSurvived: a delivery in a later life of a message whose effect an
// earlier life's handler performed skipped that effect without asking
// anyone: it asked External nothing, read nothing from Band, recalled no
// step, and still answered. It knew from state that survived the kill
// (a package-level variable, a cache the Factory's lives share), which a
// real crash loses: in production that redelivery performs the effect
// again. KeepsDurableState lifts it, for an agent with a store of its own.
func stateSurvived(cfg *config, _ proof.Result, o *observation) *verdict {
	if cfg.ownState {
		return nil
	}
	calls, _ := o.world.snapshot()
	byTurn := map[*turn]bool{}
	for _, c := range calls {
		if c.turn != nil {
			byTurn[c.turn] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range calls {
		if c.outcome != outcomePerformed || c.turn == nil || !c.turn.handler {
			continue
		}
		for _, t := range o.turns {
			if !t.handler || t.msg != c.turn.msg || t.life <= c.turn.life || !t.ok || t.asked ||
				byTurn[t] || len(t.touched) > 0 || len(t.recalled) > 0 {
				continue
			}
			label := o.labels[t.msg]
			if label == "" {
				label = t.msg
			}
			return &verdict{"state-survived", fmt.Sprintf(
				"state that a restart loses: after the kill, life %d's delivery of %s skipped the effect %q that life %d performed without asking External, Band or its ledger: "+
					"it remembered it in memory the kill did not clear (a package-level variable, a cache its lives share), which a real crash loses: "+
					"ask External.Performed, or record the effect in a Message.Step (KeepsDurableState if it has a durable store of its own)",
				t.life, label, c.key, c.turn.life)}
		}
	}
	return nil
}

func touchedAny(o *observation, t *turn, keys []string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range keys {
		if t.touched[k] {
			return true
		}
	}
	return false
}

// effectAfterSignal: an effect of a turn completed after an interrupt,
// a stop or a supersede reached the agent during that turn. The call was
// not cancelled: it ran on a context the signal does not end, or the
// agent looked at the signal only between steps.
func effectAfterSignal(_ *config, res proof.Result, o *observation) *verdict {
	for c, end := range o.performedInTurns() {
		t := c.turn
		for _, s := range res.Signals {
			if !s.Reached || s.Life != t.life || (s.RoomID != "" && s.RoomID != t.room) {
				continue
			}
			if s.Kind != proof.Interrupt && s.Kind != proof.Stop && s.Kind != proof.Supersede {
				continue
			}
			if t.start < s.Tick && c.end > s.Tick && (end == 0 || end > s.Tick) {
				return &verdict{"effect-after-signal", fmt.Sprintf(
					"work went on %s: the effect %q of %s completed after the %s reached the agent, because its call was not cancelled%s",
					signalWhere(s.Kind), c.key, o.label(t.msg), s.Kind, signalHint(res, o, t.room, t.msg, s.Kind))}
			}
		}
	}
	return nil
}

// performedInTurns yields each effect call performed within a turn, with
// the tick its turn ended at (0 while it is open).
func (o *observation) performedInTurns() iter.Seq2[effectCall, int64] {
	return func(yield func(effectCall, int64) bool) {
		calls, _ := o.world.snapshot()
		for _, c := range calls {
			if c.outcome != outcomePerformed || c.turn == nil {
				continue
			}
			o.mu.Lock()
			end := c.turn.end
			o.mu.Unlock()
			if !yield(c, end) {
				return
			}
		}
	}
}

func signalWhere(k proof.EventKind) string {
	switch k {
	case proof.Interrupt:
		return "after an interrupt"
	case proof.Stop:
		return "in a stopped room"
	}
	return "after the agent was superseded"
}

// effectOutlived: an effect completed after its turn was over (the
// handler had returned, or the loop had marked the message): work that
// outlives its turn escapes interrupts, stops and crashes, and may land
// after the reply says it is done.
func effectOutlived(_ *config, _ proof.Result, o *observation) *verdict {
	for c, end := range o.performedInTurns() {
		t := c.turn
		if end != 0 && c.end > end {
			over := "its handler had returned"
			if !t.handler {
				over = "the message had been marked"
			}
			return &verdict{"effect-outlived-turn", fmt.Sprintf(
				"the effect %q of %s completed after its turn was over (%s): work that outlives its turn escapes interrupts, stops and crashes",
				c.key, o.label(t.msg), over)}
		}
	}
	return nil
}

// effectLost: a message the agent saw answered had its effect done at
// least once. Either an effect called for it never happened, by any
// delivery (the call failed or was cut off and the agent answered as if it
// had succeeded), or, for an agent that performs effects, none of its
// deliveries performed one (unless MayPerformNoEffect): a check under a
// key that covers more than the message took another message's effect
// for its own.
func effectLost(cfg *config, _ proof.Result, o *observation) *verdict {
	calls, effects := o.world.snapshot()
	o.mu.Lock()
	answered := map[string]bool{}
	for lm := range o.repliedOK {
		answered[lm.msg] = true
	}
	o.mu.Unlock()
	for _, c := range calls {
		if c.turn == nil || !answered[c.turn.msg] || effects[c.key] > 0 || c.outcome == outcomeRefused || c.outcome == outcomeRunning {
			continue
		}
		if !o.answeredBy(c.turn) && !o.touchedLater(c) {
			// The delivery that made the call did not answer, and no
			// later one asked for it again: a plan that changed (a
			// model's), not an answer that took a lost call for done.
			continue
		}
		return &verdict{"effect-lost", fmt.Sprintf(
			"%s was answered, but its effect %q never happened: the call %s and the agent replied as if it had succeeded%s",
			o.label(c.turn.msg), c.key, lostHow(c.outcome), o.stepRecordLost(c.turn.msg))}
	}
	if cfg.noEffect {
		return nil
	}
	done := map[string]bool{} // messages with an effect performed in one of their turns
	var some string           // an effect the agent performed
	hooked := false           // some effect was performed from a hook
	for _, c := range calls {
		if c.outcome != outcomePerformed {
			continue
		}
		if c.turn == nil {
			// An effect the verifier cannot attribute: it cannot tell
			// who lacks one, and says so rather than pass in silence.
			o.mu.Lock()
			o.notes[outsideTurn] = true
			o.mu.Unlock()
			return nil
		}
		done[c.turn.msg], some = true, c.key
		hooked = hooked || c.turn.hook
	}
	if some == "" {
		return nil
	}
	o.mu.Lock()
	turned := map[string]bool{}
	for _, t := range o.turns {
		turned[t.msg] = true
	}
	o.mu.Unlock()
	for _, msg := range sortedKeys(answered) {
		if turned[msg] && !done[msg] {
			if hooked {
				return &verdict{"effect-missing", fmt.Sprintf(
					"%s was answered, but its effect was never performed, though the agent performs one for other messages (%q) from a hook: "+
						"a hook runs after the message is consumed, so a crash in between loses the effect: perform it in the handler, as a Message.Step",
					o.label(msg), some)}
			}
			return &verdict{"effect-missing", fmt.Sprintf(
				"%s was answered, but none of its deliveries performed an effect, though the agent performs one for other messages (%q): "+
					"a check under a key that covers more than the message took another's effect for its own (MayPerformNoEffect if some messages need none)",
				o.label(msg), some)}
		}
	}
	return nil
}

// stepRecordLost explains a verdict on msg by a Step whose record two
// lives each wrote to a ledger that is not durable: the first life's
// record died with it, so the next ran the Step again and got another
// result (a model's answer). "" when no Step of msg was lost so.
func (o *observation) stepRecordLost(msg string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	lives := map[string][]int{}
	for rec := range o.stepWrites {
		if rec.msg == msg && !rec.ledger.Durable() {
			lives[rec.name] = append(lives[rec.name], rec.ledger.life)
		}
	}
	for _, name := range sortedKeys(lives) {
		if ls := lives[name]; len(ls) > 1 {
			slices.Sort(ls)
			return fmt.Sprintf("; its Step %q was recorded in life %d and ran again in life %d: its record was in a MemoryLedger, lost with the crash, so the Step's result changed: "+
				"a durable Ledger keeps it (declare verify.DurableLedger() if the agent runs on one)", name, ls[0], ls[len(ls)-1])
		}
	}
	return ""
}

// answeredBy reports whether t is the delivery whose reply its life saw
// posted: the last turn of its message in its life, which replied.
func (o *observation) answeredBy(t *turn) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.repliedOK[lifeMessage{t.life, t.msg}] {
		return false
	}
	for _, u := range o.turns {
		if u.life == t.life && u.msg == t.msg && u.start > t.start {
			return false
		}
	}
	return true
}

// outsideTurn is the note for effects performed outside any turn.
const outsideTurn = "an effect was performed outside any turn (not from a handler, a hook of the Shell adapter, or a loop's turn opened with External.Started): " +
	"the verifier cannot tell which message it belongs to, so it did not judge whether every answered message had its effect"

// touchedLater reports whether a turn of c's message other than c's own
// asked about or called c's key.
func (o *observation) touchedLater(c effectCall) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range o.turns {
		if t != c.turn && t.msg == c.turn.msg && t.touched[c.key] {
			return true
		}
	}
	return false
}

func lostHow(o callOutcome) string {
	switch o {
	case outcomeFailed:
		return "failed"
	case outcomeCancelled:
		return "was cancelled"
	}
	return "was cut off"
}

// oracleGaps names the defect behind the engine's verdicts that the
// widened fault model added, or that its worlds make likely.
func oracleGaps(_ *config, res proof.Result, o *observation) *verdict {
	v := res.Violation
	if v == nil {
		return nil
	}
	switch {
	case v.Invariant == proof.InterruptConsumes:
		return &verdict{"oracle:" + string(v.Invariant), "an interrupted message left for replay: " + v.Reason}
	case v.Invariant == proof.SupersedeStops && strings.Contains(v.Reason, "kept running"):
		return &verdict{"superseded-not-stopped", "a superseded instance that did not stop: " + v.Reason}
	case v.Invariant == proof.SupersedeStops:
		return &verdict{"superseded-kept-working", "a superseded instance kept working: " + v.Reason}
	case v.Invariant == proof.AgentLifecycle && strings.Contains(v.Reason, "never lets virtual time advance"):
		return &verdict{"busy-loop", "a busy loop: " + v.Reason}
	case v.Invariant == proof.NonePending || (v.Invariant == proof.OneOutcome && strings.Contains(v.Reason, "without its reply")):
		return lostBecause(res, o, v)
	}
	return nil
}

// lostBecause explains a lost message by what the schedule did to its
// room: a room the agent joined during the run and never served, a
// human who pasted the message's dedup marker, or a text the message
// shares with another.
func lostBecause(res proof.Result, o *observation, v *proof.Violation) *verdict {
	label := strings.Fields(v.Reason)[0]
	s := res.Schedule
	if s == nil {
		return nil
	}
	var mine *proof.Event
	for i, e := range s.Events {
		if e.Kind == proof.Say && e.Spec.Label == label {
			mine = &s.Events[i]
		}
	}
	if mine == nil {
		return nil
	}
	roomID := ""
	for _, m := range res.Said {
		if m.Label == label {
			roomID = m.RoomID
		}
	}
	for _, e := range s.Events {
		if e.Kind == proof.Join && e.Room == mine.Room && roomID != "" && !o.servedRoom(roomID) {
			return &verdict{"room-not-joined", fmt.Sprintf(
				"a lost message: %s was never served: the agent was added to room %d during the run and never noticed (it lists its rooms only once, or ignores room_added)",
				label, mine.Room+1)}
		}
	}
	kind, what := "oracle:"+string(v.Invariant), "a lost reply: "
	if v.Invariant == proof.NonePending {
		what = "a lost message: "
	}
	for _, e := range s.Events {
		if e.Kind == proof.Say && e.Room == mine.Room && e.Spec.Quotes == label {
			return &verdict{kind, what + v.Reason + fmt.Sprintf(
				"; a human pasted its dedup marker in %s, and a guard that accepts a marker from any sender takes that for the agent's reply", e.Spec.Label)}
		}
	}
	for _, e := range s.Events {
		if e.Kind == proof.Say && e.Room == mine.Room && e.Spec.Label != label && mine.Spec.Text != "" && e.Spec.Text == mine.Spec.Text {
			return &verdict{kind, what + v.Reason + fmt.Sprintf(
				"; its text %q is the same as %s's, so a key or a guard that goes by the text cannot tell them apart", mine.Spec.Text, e.Spec.Label)}
		}
	}
	return nil
}

// servedRoom reports whether the agent sent any request about the room
// in any life.
func (o *observation) servedRoom(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rooms[id]
}

// useLabels names the run's messages as the engine does, whatever their
// text says.
func (o *observation) useLabels(said []proof.Said) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range said {
		if s.Label != "" {
			o.labels[s.ID] = s.Label
		}
	}
}

// unheard is the note for a control check whose signals never reached
// the agent in any of its schedules, though it had a socket: it says so
// rather than pass the check vacuously.
func unheard(results []proof.Result) string {
	sent, reached := 0, 0
	for _, r := range results {
		for _, s := range r.Signals {
			if s.Kind == proof.Supersede {
				continue
			}
			sent++
			if s.Reached {
				reached++
			}
		}
	}
	if sent == 0 || reached > 0 {
		return ""
	}
	return fmt.Sprintf("none of the %d control signals sent reached the agent: its socket never delivered a push to it (did it join agent_control:<agent id>?)", sent)
}
