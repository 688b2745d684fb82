package oracle

import (
	"encoding/json"
	"regexp"

	"github.com/band-once/bandonce/fakeband"
)

// The kinds of writes of Band's agent API the judges count, each under
// the key it carries (bandonce's guards put it there): a memory's
// metadata.dedup_key, a task's detail marker, a comment's marker, a
// created room's title marker.
const (
	WriteMemory  = "memory"
	WriteTask    = "task"
	WriteComment = "comment"
	WriteRoom    = "room"
)

// WriteTwice is a write found twice under one key in the fake's truth.
type WriteTwice struct {
	// Kind is WriteMemory, WriteTask, WriteComment or WriteRoom.
	Kind string
	// Key is the key both carry; Room the room they are in ("" for a
	// memory or a created room); Text the start of what was written.
	Key, Room, Text string
}

// roomMarker is the title suffix bandonce's CreateRoom guard writes.
var roomMarker = regexp.MustCompile(` \[bo:[0-9a-f]{12}\]$`)

// DoubleWrites returns, in a stable order, every write of the agent that
// the truth holds twice under one key: memories by their metadata's
// dedup_key, tasks by their detail's marker in a room, comments by their
// marker in a room, created rooms by their title's marker. Writes without
// a key are not counted here (no key, no identity across deliveries).
func DoubleWrites(agentID string, memories []fakeband.Memory, tasks []fakeband.Task, createdRooms []string) []WriteTwice {
	var out []WriteTwice
	seen := map[[3]string]int{}
	count := func(kind, room, key, text string) {
		if key == "" {
			return
		}
		id := [3]string{kind, room, key}
		if seen[id]++; seen[id] == 2 {
			out = append(out, WriteTwice{Kind: kind, Key: key, Room: room, Text: text})
		}
	}
	for _, m := range memories {
		if m.SourceAgentID != agentID {
			continue
		}
		var meta struct {
			Key string `json:"dedup_key"`
		}
		_ = json.Unmarshal(m.Metadata, &meta)
		count(WriteMemory, "", meta.Key, m.Content)
	}
	for _, t := range tasks {
		if t.CreatorID == agentID {
			key, _ := MarkerKey(t.Detail)
			count(WriteTask, t.RoomID, key, t.Subject)
		}
		for _, c := range t.Comments {
			if c.AuthorID == agentID {
				key, _ := MarkerKey(c.Text)
				count(WriteComment, t.RoomID, key, c.Text)
			}
		}
	}
	for _, title := range createdRooms {
		count(WriteRoom, "", roomMarker.FindString(title), title)
	}
	return out
}
