package verify

import (
	"fmt"
	"testing"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/proof"
)

var (
	defLookAlikes = &checkDef{name: "look-alikes", doc: "messages with the same text, said in the same second, and a human pasting the agent's dedup marker",
		build: func(b *builder) trial { return b.lookAlikes() }}
	defJoinedRooms = &checkDef{name: "joined-rooms", doc: "rooms the agent is added to while it runs, some announced by a push it never gets",
		per10: 5, build: func(b *builder) trial { return b.joinedRooms() }}
)

// lookAlikes fills one or two rooms with messages that are hard to tell
// apart, all said at the same instant, so they share inserted_at: two or
// three say the same plain line, and one pastes, as its last line, the
// dedup marker of a message said before it that is still unanswered. A
// key derived from the text or the time, or a guard that accepts a
// marker from any sender, confuses them. Now and then a kill after a
// reply makes a guard read the room.
func (b *builder) lookAlikes() trial {
	rooms := b.r.Between(1, 2)
	var events []proof.Event
	total := 0
	for room := range rooms {
		n := b.r.Between(3, 5)
		total += n
		text := []string{"ok", "thanks", "ok, thanks"}[b.r.IntN(3)]
		quoting := b.r.Between(1, n-1)
		var others []int
		for _, i := range b.r.Perm(n) {
			if i != quoting {
				others = append(others, i)
			}
		}
		alike := map[int]bool{others[0]: true, others[1]: true}
		if len(others) > 2 && b.r.IntN(2) == 0 {
			alike[others[2]] = true
		}
		for i := range n {
			spec := proof.MessageSpec{Label: fmt.Sprintf("r%dm%d", room+1, i+1), Outcome: proof.Reply}
			switch {
			case i == quoting:
				spec.Quotes = fmt.Sprintf("r%dm%d", room+1, b.r.IntN(i)+1)
			case alike[i]:
				spec.Text = text
			}
			events = append(events, proof.Event{Kind: proof.Say, Room: room, Spec: spec})
		}
	}
	if b.r.IntN(2) == 0 {
		events = append(events, proof.Event{At: b.r.Between(4, 4+5*total), Kind: proof.KillAfter, Endpoint: fakeband.EndpointPost})
	}
	return trial{sched: b.schedule(rooms, events), ext: b.plan()}
}

// joinedRooms has the agent added to one or two rooms while it runs; half
// the room_added pushes are lost, so an agent must also list its rooms
// again now and then. Messages in a joined room are said after the join.
func (b *builder) joinedRooms() trial {
	rooms := b.r.Between(2, 3)
	var events []proof.Event
	for room := range rooms {
		joinAt := 0
		if room > 0 {
			joinAt = b.r.Between(2, 8)
			if b.r.IntN(2) == 0 {
				events = append(events, proof.Event{At: joinAt, Kind: proof.PushFault, PushEvent: "room_added", Push: proof.PushLost})
			}
			events = append(events, proof.Event{At: joinAt, Kind: proof.Join, Room: room})
		}
		for i := range b.r.Between(1, 3) {
			spec := proof.MessageSpec{Label: fmt.Sprintf("r%dm%d", room+1, i+1), Outcome: proof.Reply}
			at := joinAt
			if at > 0 {
				at += b.r.Between(0, 4)
			}
			events = append(events, proof.Event{At: at, Kind: proof.Say, Room: room, Spec: spec})
		}
	}
	return trial{sched: b.schedule(rooms, events), ext: b.plan()}
}

// LookAlikes says messages that are hard to tell apart: the same plain
// line from two or three humans, all in the same second of inserted_at,
// and a human pasting, as a last line, the dedup marker of a message not
// yet answered. Keys must come from the message's identity, and a guard
// must accept only the agent's own marker.
func LookAlikes(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defLookAlikes, f, opts)
}

// JoinedRooms adds the agent to rooms while it runs, losing some of the
// room_added pushes: the agent must notice every room it is added to.
func JoinedRooms(t testing.TB, f Factory, opts ...Option) Result {
	t.Helper()
	return runOne(t, defJoinedRooms, f, opts)
}
