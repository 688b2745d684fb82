package proof

import (
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
)

// truth is the ground truth the oracle reads, gathered once.
type truth struct {
	s        *sim
	posts    [][]fakeband.Post            // agent posts, by room
	byKey    []map[string][]fakeband.Post // agent posts by dedup key, by room
	marks    map[string][]fakeband.Mark   // by message id
	starts   []HandlerStart
	sends    []sendRecord
	turnReqs []roomRequest
	keyOf    map[string]string // message id -> reply key
	repliers []map[string]int  // by room: key -> messages that may reply with it
}

func (s *sim) gather() *truth {
	t := &truth{s: s, marks: map[string][]fakeband.Mark{}, keyOf: map[string]string{}}
	for range s.rooms {
		t.posts = append(t.posts, nil)
		t.byKey = append(t.byKey, map[string][]fakeband.Post{})
		t.repliers = append(t.repliers, map[string]int{})
	}
	said := map[string]int{}
	for i, r := range s.rooms {
		for _, p := range s.band.Posts(r.ID) {
			if p.SenderID != s.agent.ID {
				said[p.ID] = p.Seq
				continue
			}
			t.posts[i] = append(t.posts[i], p)
			key, _ := oracle.MarkerKey(p.Content)
			t.byKey[i][key] = append(t.byKey[i][key], p)
		}
	}
	for _, m := range s.messages {
		m.Seq = said[m.ID]
		t.marks[m.ID] = s.band.Marks(s.agent.ID, m.ID)
		key := s.opts.KeyOf(m.ID, m.Spec)
		t.keyOf[m.ID] = key
		if m.Spec.Outcome.repliesEventually() {
			t.repliers[m.Room][key]++
		}
	}
	t.starts, _ = s.world.snapshot()
	t.sends = s.gate.sendRecords()
	t.turnReqs = s.gate.turnRequests()

	return t
}

func (t *truth) label(room int, key string) string {
	for _, m := range t.s.messages {
		if m.Room == room && t.keyOf[m.ID] == key {
			return m.Spec.Label
		}
	}
	if t.turnEffect(key) {
		return "a message a handler sent while it ran"
	}
	return "no message"
}

// processedSeq is the seq of the message's processed mark, or 0.
func (t *truth) processedSeq(id string) int { return oracle.ProcessedSeq(t.marks[id]) }

func (t *truth) failedBefore(id string, seq int) bool {
	_, failed := oracle.FailedBefore(t.marks[id], seq)
	return failed
}

// windowStart is where the message's cycle can have begun: after it was
// said and after the room's previous message was processed (/next serves
// a room in order).
func (t *truth) windowStart(m *sentMessage, done int) int {
	var processed []int
	for _, o := range t.s.messages {
		if o.Room == m.Room && o.ID != m.ID {
			processed = append(processed, t.processedSeq(o.ID))
		}
	}
	return oracle.WindowStart(m.Seq, done, processed)
}

// interruptedIn reports whether an interrupt that can have reached the
// agent falls inside the message's cycle window: after event from, before
// event to. A stamp s means "after event s", so an interrupt sent at Seq
// and arrived by Until overlaps when Seq < to and Until >= from.
func (t *truth) interruptedIn(room, from, to int) bool {
	for _, c := range t.s.controls {
		if c.Kind != Interrupt || (c.Room >= 0 && c.Room != room) || c.Lost {
			continue
		}
		if c.Seq < to && c.Until >= from {
			return true
		}
	}
	return false
}

func (t *truth) messagesWithKey(room int, key string) []*sentMessage {
	var out []*sentMessage
	for _, m := range t.s.messages {
		if m.Room == room && t.keyOf[m.ID] == key {
			out = append(out, m)
		}
	}
	return out
}

// openAt returns the room's message whose attempt was open at seq.
func (t *truth) openAt(room, seq int) *sentMessage {
	for _, m := range t.s.messages {
		if m.Room == room && oracle.OpenAt(t.marks[m.ID], seq) {
			return m
		}
	}
	return nil
}

// claimedBetween reports whether a message with key had an attempt opened
// in (from, to): a new cycle that may post the key again.
func (t *truth) claimedBetween(room int, key string, from, to int) bool {
	for _, m := range t.messagesWithKey(room, key) {
		if oracle.ClaimedBetween(t.marks[m.ID], from, to) {
			return true
		}
	}
	return false
}

// sendOf finds the reply POST that applied post p.
func (t *truth) sendOf(room int, p fakeband.Post, key string) *sendRecord {
	roomID := t.s.rooms[room].ID
	for i := range t.sends {
		sr := &t.sends[i]
		if sr.Room == roomID && sr.Key == key && sr.Released && sr.Start < p.Seq && (!sr.Answered || sr.End >= p.Seq) {
			return sr
		}
	}
	return nil
}

func (t *truth) labelOf(id string) string {
	for _, m := range t.s.messages {
		if m.ID == id {
			return m.Spec.Label
		}
	}
	return id
}
