package oracle

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce/fakeband"
)

// Each kind of write found twice under one key is named once, with its
// kind; writes of another agent, without a key, or under distinct keys
// are not doubles.
func TestDoubleWritesNamesEachWriteFoundTwiceUnderOneKey(t *testing.T) {
	meta := func(key string) json.RawMessage {
		raw, _ := json.Marshal(map[string]string{"dedup_key": key})
		return raw
	}
	memories := []fakeband.Memory{
		{SourceAgentID: "a", Content: "m1", Metadata: meta("k1")},
		{SourceAgentID: "a", Content: "m1 again", Metadata: meta("k1")},
		{SourceAgentID: "a", Content: "m2", Metadata: meta("k2")},
		{SourceAgentID: "b", Content: "theirs", Metadata: meta("k2")},
		{SourceAgentID: "a", Content: "no key"},
		{SourceAgentID: "a", Content: "no key either"},
	}
	tasks := []fakeband.Task{
		{RoomID: "r1", CreatorID: "a", Subject: "t1", Detail: "x\n[dedup_key:t]", Comments: []fakeband.TaskComment{
			{AuthorID: "a", Text: "done\n[dedup_key:c]"}, {AuthorID: "a", Text: "done\n[dedup_key:c]"}, {AuthorID: "h", Text: "ok"}}},
		{RoomID: "r1", CreatorID: "a", Subject: "t1 again", Detail: "[dedup_key:t]"},
		{RoomID: "r2", CreatorID: "a", Subject: "t1 elsewhere", Detail: "[dedup_key:t]"},
	}
	rooms := []string{"follow-up [bo:0123456789ab]", "follow-up [bo:0123456789ab]", "other [bo:ffffffffffff]", "untitled", "untitled"}
	assert.Equal(t, []WriteTwice{
		{Kind: WriteMemory, Key: "k1", Text: "m1 again"},
		{Kind: WriteComment, Key: "c", Room: "r1", Text: "done\n[dedup_key:c]"},
		{Kind: WriteTask, Key: "t", Room: "r1", Text: "t1 again"},
		{Kind: WriteRoom, Key: " [bo:0123456789ab]", Text: "follow-up [bo:0123456789ab]"},
	}, DoubleWrites("a", memories, tasks, rooms))
	assert.Empty(t, DoubleWrites("a", memories[2:], tasks[2:], rooms[2:]))
}
