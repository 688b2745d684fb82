package proof

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// notices judges the error events that tell a room a message was given up
// on (bandonce.NoticeKey), as part of OneOutcome: at most one per message,
// none for a message that was answered, and, when the options require it,
// exactly one for every message that was dead-lettered. outcomes counted
// the case already: the notice is part of the message's one outcome.
func (t *truth) notices(v *judgement) {
	for _, m := range t.s.messages {
		done := t.processedSeq(m.ID)
		if done == 0 {
			continue // none-pending has it
		}
		told := t.told(m.Room, m.ID)
		answered := len(t.byKey[m.Room][t.keyOf[m.ID]]) > 0
		switch {
		case told > 1:
			v.Fail(OneOutcome, "%s's room was told %d times that it was given up on", m.Spec.Label, told)
		case told > 0 && answered:
			v.Fail(OneOutcome, "%s was answered, yet its room was told it was given up on", m.Spec.Label)
		case told == 0 && !answered && t.s.opts.DeadLettersTold && t.deadLettered(m.ID, done) &&
			!t.interruptedIn(m.Room, t.windowStart(m, done), done):
			// (An interrupt that reached its turn may have consumed it
			// after a dead-letter mark that did not seem to land.)
			v.Fail(OneOutcome, "%s was dead-lettered without a word to its room", m.Spec.Label)
		}
	}
	t.deadLettersKept(v)
}

// deadLettersKept judges, as part of OneOutcome, that a durable ledger
// that keeps dead letters (one the agent named, see External.keeps) holds
// every message the agent gave up on, for an operator to replay.
func (t *truth) deadLettersKept(v *judgement) {
	t.s.world.mu.Lock()
	dl := t.s.world.kept
	t.s.world.mu.Unlock()
	if dl == nil {
		return
	}
	all, err := dl.DeadLetters(context.Background())
	if err != nil {
		v.Fail(OneOutcome, "the dead letters cannot be listed: %v", err)
		return
	}
	kept := map[string]bool{}
	for _, d := range all {
		kept[d.RoomID+"/"+d.MessageID] = true
	}
	for _, m := range t.s.messages {
		done := t.processedSeq(m.ID)
		if done != 0 && t.deadLettered(m.ID, done) && !kept[t.s.rooms[m.Room].ID+"/"+m.ID] &&
			!t.interruptedIn(m.Room, t.windowStart(m, done), done) {
			// (As for its notice: a life that gave it up may have died
			// before keeping it, and an interrupt consumed the next
			// life's turn of it.)
			v.Fail(OneOutcome, "%s was given up on, but its dead letter is not kept for a replay", m.Spec.Label)
		}
	}
}

// told counts the agent's error events in the room for the message.
func (t *truth) told(room int, id string) int {
	n := 0
	for _, e := range t.s.band.ChatEvents(t.s.rooms[room].ID) {
		if e.SenderID == t.s.agent.ID && e.MessageType == string(bandonce.EventError) && noticeKey(e) == bandonce.NoticeKey(id) {
			n++
		}
	}
	return n
}

func noticeKey(e fakeband.ChatEvent) string {
	var meta struct {
		Key string `json:"dedup_key"`
	}
	_ = json.Unmarshal(e.Metadata, &meta)
	return meta.Key
}

// deadLettered reports whether the Shell gave the message up before seq:
// a failed mark with its dead-letter reason.
func (t *truth) deadLettered(id string, seq int) bool {
	for _, mk := range t.marks[id] {
		if mk.Kind == fakeband.StatusFailed && mk.Seq < seq && strings.HasPrefix(mk.Error, "dead-lettered") {
			return true
		}
	}
	return false
}
