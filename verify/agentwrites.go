package verify

import (
	"fmt"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// writeTwice: at most one memory, task, task comment and created room
// per key, in the fake's ground truth, each a violation with its own name
// (memory-twice, task-twice, comment-twice, room-twice), as eventTwice
// judges events.
func writeTwice(res proof.Result) *verdict {
	var tasks []fakeband.Task
	for _, ts := range res.Tasks {
		tasks = append(tasks, ts...)
	}
	doubles := oracle.DoubleWrites(res.AgentID, res.Memories, tasks, res.CreatedRooms)
	if len(doubles) == 0 {
		return nil
	}
	d := doubles[0]
	what := map[string]string{
		oracle.WriteMemory:  "the memory with key %q was stored twice (%q)",
		oracle.WriteTask:    "the task with key %q was created twice on a room's board (%q)",
		oracle.WriteComment: "the comment with key %q was posted twice on a room's tasks (%q)",
		oracle.WriteRoom:    "the room with marker %q was created twice (%q)",
	}[d.Kind]
	return &verdict{d.Kind + "-twice", "a double write: " + fmt.Sprintf(what, d.Key, excerptOf(d.Text)) +
		": a redelivery did not find it again; make it with the Message method that guards it (StoreMemory, CreateTask, UpdateTask, CreateRoom)"}
}
