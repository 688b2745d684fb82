package procverify

import (
	"encoding/json"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// notices judges, as part of OneOutcome, the error events that tell a
// room a message was given up on (bandonce.NoticeKey): at most one per
// message, and none for a message that was answered. A message given up on
// is a violation of its own here (OneOutcome), so a room told of one is
// never the only fault.
func (t *truth) notices(v *judgement) {
	told := map[string]int{}
	for _, r := range t.s.rooms {
		for _, e := range t.s.band.ChatEvents(r.ID) {
			if e.SenderID == t.s.agent.ID && e.MessageType == string(bandonce.EventError) {
				told[noticeKey(e)]++
			}
		}
	}
	for _, m := range t.messages {
		n := told[bandonce.NoticeKey(m.ID)]
		if n == 0 {
			continue
		}
		switch {
		case n > 1:
			v.Fail(OneOutcome, "%s's room was told %d times that it was given up on", m.Label, n)
		case len(t.answers[m.ID]) > 0:
			v.Fail(OneOutcome, "%s was answered, yet its room was told it was given up on", m.Label)
		}
	}
}

func noticeKey(e fakeband.ChatEvent) string {
	var meta struct {
		Key string `json:"dedup_key"`
	}
	_ = json.Unmarshal(e.Metadata, &meta)
	return meta.Key
}
