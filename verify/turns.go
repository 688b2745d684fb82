package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// This file observes the effects of a turn besides its reply: the
// messages a handler sends while it runs (bandonce.Message.Send), its
// events, and its journaled steps, and judges them. (turnspans.go holds
// when each turn began and ended.)

// effectSend is one message or event a handler sent while it ran.
type effectSend struct {
	life, delivery int
	room, msg      string
	key            string // "" when it carried none
	kind           string // "message", or the event's type
	content        string // without the marker line
	// cause is why the handler's context had ended when it was sent:
	// ErrInterrupted or ErrStopped make it a violation.
	cause error
}

// stepRecord names one journaled step in one instance's ledger (a life
// can run two instances: the supersede check's).
type stepRecord struct {
	ledger          *stepLedger
	room, msg, name string
}

// endpointEvent names POST /agent/chats/{id}/events.
const endpointEvent = fakeband.EndpointEvent

// eventPath reports a POST to a room's events.
func eventPath(method string, parts []string) bool {
	return method == http.MethodPost && len(parts) == 4 && parts[3] == "events"
}

// noteEffect records a POST of a message or event made while the
// handler of the room's open message was running, and reports whether it
// was one: a POST made after the handler returned is its reply.
func (r *recorder) noteEffect(req *http.Request, room string, event bool) bool {
	o := r.o
	o.mu.Lock()
	msg := o.open[lifeRoom{r.life, room}]
	hctx := o.running[lifeMessage{r.life, msg}]
	delivery := o.delivery[lifeRoom{r.life, room}]
	o.mu.Unlock()
	if msg == "" || hctx == nil {
		return false
	}
	e := effectSend{life: r.life, delivery: delivery, room: room, msg: msg}
	if cause := context.Cause(hctx); errors.Is(cause, bandonce.ErrInterrupted) || errors.Is(cause, bandonce.ErrStopped) {
		e.cause = cause
	}
	data := peekBody(req)
	if event {
		var body struct {
			Event struct {
				Content     string         `json:"content"`
				MessageType string         `json:"message_type"`
				Metadata    map[string]any `json:"metadata"`
			} `json:"event"`
		}
		_ = json.Unmarshal(data, &body)
		e.kind, e.content = body.Event.MessageType+" event", body.Event.Content
		e.key, _ = body.Event.Metadata["dedup_key"].(string)
	} else {
		var body struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		_ = json.Unmarshal(data, &body)
		e.kind = "message"
		e.key, _ = oracle.MarkerKey(body.Message.Content)
		e.content = strings.TrimRight(body.Message.Content, " \t\r\n")
		if e.key != "" {
			e.content = strings.TrimRight(e.content[:strings.LastIndexByte(e.content, '\n')+1], "\n")
		}
	}
	o.mu.Lock()
	o.effects = append(o.effects, e)
	if e.key != "" {
		o.effectKeys[e.key] = true
	}
	o.mu.Unlock()
	return true
}

// peekBody reads a request's body and puts it back for the next reader.
func peekBody(req *http.Request) []byte {
	if req.Body == nil {
		return nil
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	if err != nil {
		return nil
	}
	return data
}

// isEffectKey reports whether a post's key belongs to an effect sent
// while a handler ran, and never to a reply.
func (o *observation) isEffectKey(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.effectKeys[key] {
		return false
	}
	for _, ks := range o.keys {
		for _, k := range ks {
			if k == key {
				return false
			}
		}
	}
	return true
}

// stepLedger is the ledger of one instance of a Shell agent, watched:
// every step result it records.
type stepLedger struct {
	bandonce.Ledger
	o    *observation
	life int
}

// stepSpan is one run of a step's fn, from the ledger's answer that it
// was not done to the record of its result: the effects called in it
// belong to the step, and a later delivery that reads the record skips
// them rightly.
type stepSpan struct {
	msg, name  string
	start, end int64 // end is 0 until the result is recorded
}

// Step reads the record, and notes what the read means: the running
// turn recalls a step done before, or begins its fn.
func (l *stepLedger) Step(ctx context.Context, room, messageID, name string) ([]byte, bool, error) {
	result, done, err := l.Ledger.Step(ctx, room, messageID, name)
	if err != nil {
		return result, done, err
	}
	tick := l.o.ticker()
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	if !done {
		l.o.steps = append(l.o.steps, &stepSpan{msg: messageID, name: name, start: tick})
		return result, done, err
	}
	for _, t := range l.o.turns {
		if t.handler && t.life == l.life && t.msg == messageID && t.end == 0 {
			t.recalled[name] = true
		}
	}
	return result, done, err
}

func (l *stepLedger) SetStep(ctx context.Context, room, messageID, name string, result []byte) error {
	tick := l.o.ticker()
	l.o.mu.Lock()
	l.o.stepWrites[stepRecord{l, room, messageID, name}]++
	for i := len(l.o.steps) - 1; i >= 0; i-- {
		if sp := l.o.steps[i]; sp.msg == messageID && sp.name == name && sp.end == 0 {
			sp.end = tick
			break
		}
	}
	l.o.mu.Unlock()
	return l.Ledger.SetStep(ctx, room, messageID, name, result)
}

// Key reads a dedup key's record: while a handler runs in the room, the
// read is a Send or an Event of its turn asking whether the key was sent.
func (l *stepLedger) Key(ctx context.Context, room, key string) (bandonce.KeyState, error) {
	l.o.mu.Lock()
	if msg := l.o.open[lifeRoom{l.life, room}]; msg != "" && l.o.running[lifeMessage{l.life, msg}] != nil {
		l.o.lookups = append(l.o.lookups, sent{life: l.life, delivery: l.o.delivery[lifeRoom{l.life, room}], room: room, msg: msg, key: key})
	}
	l.o.mu.Unlock()
	return l.Ledger.Key(ctx, room, key)
}

// recalledBy reports whether the turn t read the record of a step whose
// fn performed the call c: t skips that effect rightly.
func (o *observation) recalledBy(t *turn, c effectCall) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.turn == nil || len(t.recalled) == 0 {
		return false
	}
	for _, sp := range o.steps {
		if sp.msg == c.turn.msg && t.recalled[sp.name] && sp.end != 0 && sp.start <= c.begin && c.begin <= sp.end {
			return true
		}
	}
	return false
}

// BindAgent passes the shell's binding on to the watched ledger, if it
// binds (bandonce.AgentBinder): watching it must not hide that.
func (l *stepLedger) BindAgent(ctx context.Context, agentID string) error {
	if b, ok := l.Ledger.(bandonce.AgentBinder); ok {
		return b.BindAgent(ctx, agentID)
	}
	return nil
}

// sentAfterSignal: nothing is sent for a turn after an interrupt or a
// stop reached it. (effectAfterSignal, in gaps.go, judges the calls to
// the external system.)
func sentAfterSignal(o *observation) *verdict {
	o.mu.Lock()
	var bad *effectSend
	for i := range o.effects {
		if o.effects[i].cause != nil {
			bad = &o.effects[i]
			break
		}
	}
	o.mu.Unlock()
	if bad == nil {
		return nil
	}
	return &verdict{"sent-after-signal", fmt.Sprintf(
		"work went on %s: the turn of %s sent %s (%q) after its context was cancelled (%s)",
		cancelledBy(bad.cause), o.label(bad.msg), article(bad.kind), excerptOf(bad.content), causeName(bad.cause))}
}

// effectWithoutKey: every message and event of a turn carries its dedup
// key (a message's marker line, an event's metadata), or a redelivery
// cannot tell that it was already sent.
func effectWithoutKey(o *observation) *verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.effects {
		if e.key == "" {
			label := o.labels[e.msg]
			if label == "" {
				label = e.msg
			}
			return &verdict{"effect-without-key", fmt.Sprintf(
				"the turn of %s sent %s (%q) that carried no dedup key, so no guard can find it again after a redelivery",
				label, article(e.kind), excerptOf(e.content))}
		}
	}
	return nil
}

// effectKeysUnstable: a turn that sends the same thing at two deliveries
// must send it under the same key, or a redelivery repeats it. landed
// holds the keys that reached the room.
func effectKeysUnstable(o *observation, landed map[string]bool) *verdict {
	o.mu.Lock()
	effects := append([]effectSend(nil), o.effects...)
	o.mu.Unlock()
	type unit struct{ room, msg, kind, content string }
	first := map[unit]effectSend{}
	for _, e := range effects {
		if e.key == "" || !landed[e.room+"\x00"+e.key] {
			continue
		}
		u := unit{e.room, e.msg, e.kind, e.content}
		f, seen := first[u]
		if !seen {
			first[u] = e
			continue
		}
		if f.key != e.key && (f.life != e.life || f.delivery != e.delivery) {
			return &verdict{"effect-keys-unstable", fmt.Sprintf(
				"the turn of %s sent the %s %q twice, under the keys %q and %q: its effects' keys are not stable across deliveries (default keys follow the order of the Send and Event calls; give each a DedupKey)",
				o.label(e.msg), e.kind, excerptOf(e.content), f.key, e.key)}
		}
	}
	return nil
}

// stepRanAgain: a step's fn runs at most once per message and name for
// as long as the ledger keeps its record, and a life's ledger keeps it
// for the life.
func stepRanAgain(o *observation) *verdict {
	o.mu.Lock()
	var again []stepRecord
	for rec, n := range o.stepWrites {
		if n > 1 {
			again = append(again, rec)
		}
	}
	o.mu.Unlock()
	if len(again) == 0 {
		return nil
	}
	sort.Slice(again, func(i, j int) bool { return again[i].msg+again[i].name < again[j].msg+again[j].name })
	s := again[0]
	return &verdict{"step-ran-again", fmt.Sprintf(
		"the step %q of %s ran again after its result was recorded: the ledger did not return the record, so its fn ran twice in one process",
		s.name, o.label(s.msg))}
}

// landedKeys are the keys of the agent's posts and events in the fake's
// ground truth, as room id and key.
func landedKeys(res proof.Result) map[string]bool {
	landed := map[string]bool{}
	for _, posts := range res.Posts {
		for _, p := range posts {
			if k, ok := oracle.MarkerKey(p.Content); ok {
				landed[p.RoomID+"\x00"+k] = true
			}
		}
	}
	for _, events := range res.Events {
		for _, e := range events {
			if k := eventKey(e); k != "" {
				landed[e.RoomID+"\x00"+k] = true
			}
		}
	}
	return landed
}

// eventKey reads the dedup key from a stored event's metadata.
func eventKey(e fakeband.ChatEvent) string {
	var meta struct {
		Key string `json:"dedup_key"`
	}
	_ = json.Unmarshal(e.Metadata, &meta)
	return meta.Key
}

// eventTwice: at most one event per dedup key and room, in the fake's
// ground truth.
func eventTwice(o *observation, res proof.Result) *verdict {
	for room, events := range res.Events {
		seen := map[string]int{}
		for _, e := range events {
			k := eventKey(e)
			if k == "" {
				continue
			}
			if seen[k]++; seen[k] == 2 {
				return &verdict{"event-twice", fmt.Sprintf(
					"a double post: room %d got the %s event with key %q twice (%q)", room+1, e.MessageType, k, excerptOf(e.Content))}
			}
		}
	}
	return nil
}

// article puts "a" or "an" before a noun.
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// excerptOf shortens a text for a reason.
func excerptOf(s string) string {
	const max = 40
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
