package verify

import (
	"fmt"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// noticeForAnswered: the error event that tells a room a message was
// given up on (bandonce.NoticeKey) is never posted for a message that was
// answered. (At most one per key is eventTwice's; that a message given up
// on is a violation at all is the oracle's.)
func noticeForAnswered(o *observation, res proof.Result) *verdict {
	replied := map[string]bool{} // room id and reply key
	for _, posts := range res.Posts {
		for _, p := range posts {
			if k, ok := oracle.MarkerKey(p.Content); ok {
				replied[p.RoomID+"\x00"+k] = true
			}
		}
	}
	for _, s := range res.Said {
		answered := false
		for _, k := range o.keys[s.ID] {
			answered = answered || (k != "" && replied[s.RoomID+"\x00"+k])
		}
		if !answered {
			continue
		}
		for _, events := range res.Events {
			for _, e := range events {
				if e.RoomID == s.RoomID && e.MessageType == string(bandonce.EventError) && eventKey(e) == bandonce.NoticeKey(s.ID) {
					return &verdict{"notice-for-answered", fmt.Sprintf(
						"%s was answered, yet its room was told it was given up on (%q)", o.label(s.ID), excerptOf(e.Content))}
				}
			}
		}
	}
	return nil
}
