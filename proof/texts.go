package proof

import (
	"time"
)

// say posts a human message: the spec (or its plain text) and, when the
// spec quotes an earlier message, that message's dedup marker as the last
// line, as a human pasting the agent's output back into the chat does.
// It counts what makes the room hard to tell apart: a text said before
// in the room, a second of inserted_at shared with an earlier message,
// and a marker that a human, not the agent, wrote.
func (s *sim) say(ev Event) {
	room := s.room(ev.Room)
	text := ev.Spec.body()
	quoted := s.quotedKey(room, ev.Spec.Quotes)
	if quoted != "" {
		text += "\n[dedup_key:" + quoted + "]"
	}
	id, err := s.band.Say(s.rooms[room].ID, s.human.ID, text, s.agent.ID)
	if err != nil {
		return // the fake refused (it should not); the message does not exist
	}
	now := time.Now()
	for _, m := range s.messages {
		if m.Room != room {
			continue
		}
		if m.Spec.body() == ev.Spec.body() {
			s.faults["human_same_text"]++
			break
		}
	}
	for _, m := range s.messages {
		if m.Room == room && m.SaidAt.Sub(s.start).Truncate(time.Second) == now.Sub(s.start).Truncate(time.Second) {
			s.faults["human_same_second"]++
			break
		}
	}
	if quoted != "" {
		s.faults["human_quotes_marker"]++
	}
	s.messages = append(s.messages, &sentMessage{ID: id, Room: room, Spec: ev.Spec, SaidAt: now})
}

// quotedKey is the dedup key of the room's message labelled label, as
// the agent's reply to it would carry it, or "" if there is none.
func (s *sim) quotedKey(room int, label string) string {
	if label == "" {
		return ""
	}
	for _, m := range s.messages {
		if m.Room == room && m.Spec.Label == label {
			return s.opts.KeyOf(m.ID, m.Spec)
		}
	}
	return ""
}
