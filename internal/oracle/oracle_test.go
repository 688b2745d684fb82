package oracle

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/lifecycle"
)

func TestMarkerKeyReadsTheLastLineOnly(t *testing.T) {
	for _, tc := range []struct {
		content, key string
		ok           bool
	}{
		{"hello\n[dedup_key:k1]", "k1", true},
		{"[dedup_key:only]", "only", true},
		{"hello\n  [dedup_key:spaced]  \r\n\n", "spaced", true},
		{"hello\n[dedup_key:a b:c]", "a b:c", true},
		{"hello\n[dedup_key:]", "", false},
		{"[dedup_key:k1]\nthen more", "", false},
		{"quoting [dedup_key:k1] inline", "", false},
		{"hello\n[dedup_key:k1", "", false},
		{"", "", false},
	} {
		key, ok := MarkerKey(tc.content)
		assert.Equal(t, tc.ok, ok, "%q", tc.content)
		assert.Equal(t, tc.key, key, "%q", tc.content)
	}
}

// The oracle reads what the shell writes, with a reader of its own.
func TestMarkerKeyReadsTheShellsMarker(t *testing.T) {
	for _, key := range []string{"k", "msg:123", "ünï code", "a]b"} {
		got, ok := MarkerKey(lifecycle.AppendMarker("a reply\n\n", key))
		assert.True(t, ok, key)
		assert.Equal(t, key, got)
	}
}

func marks(kinds ...string) []fakeband.Mark {
	out := make([]fakeband.Mark, len(kinds))
	for i, k := range kinds {
		out[i] = fakeband.Mark{Seq: 10 * (i + 1), Kind: k}
	}
	return out
}

func TestMarkReaders(t *testing.T) {
	// processing at 10, failed at 20, processing at 30, processed at 40.
	m := marks(fakeband.StatusProcessing, fakeband.StatusFailed, fakeband.StatusProcessing, fakeband.StatusProcessed)

	assert.Equal(t, 40, ProcessedSeq(m))
	assert.Equal(t, 0, ProcessedSeq(m[:3]))

	for seq, open := range map[int]bool{5: false, 10: true, 15: true, 20: false, 29: false, 30: true, 39: true, 40: false, 99: false} {
		assert.Equal(t, open, OpenAt(m, seq), "open at %d", seq)
	}

	assert.True(t, ClaimedBetween(m, 20, 31))
	assert.False(t, ClaimedBetween(m, 10, 30), "both ends are outside")
	assert.True(t, ClaimedBetween(m, 0, 11))
	assert.False(t, ClaimedBetween(nil, 0, 100))
}

type violation struct{ rule, reason string }

func TestJudgementKeepsEachRulesFirstFailure(t *testing.T) {
	j := NewJudgement(func(rule string, reason string) *violation { return &violation{rule, reason} })
	assert.Nil(t, j.First([]string{"a", "b"}))

	j.Check("a")
	j.Check("b")
	j.Check("b")
	j.Fail("b", "first %d", 1)
	j.Fail("b", "second %d", 2)
	j.Fail("c", "not in the order")

	assert.Equal(t, map[string]int{"a": 1, "b": 2}, j.Checks)
	assert.Equal(t, map[string]int{"b": 2, "c": 1}, j.Violated)
	assert.Equal(t, &violation{"b", "first 1"}, j.First([]string{"a", "b", "c"}))
	assert.Equal(t, &violation{"c", "not in the order"}, j.First([]string{"c", "b"}), "judging order decides")
	assert.Nil(t, j.First([]string{"a"}))
}

func TestFailedBeforeFindsTheFirstFailureWithItsReasonBeforeASeq(t *testing.T) {
	marks := []fakeband.Mark{
		{Kind: fakeband.StatusProcessing, Seq: 2},
		{Kind: fakeband.StatusFailed, Seq: 3, Error: "   "},
		{Kind: fakeband.StatusFailed, Seq: 5, Error: "the model timed out"},
		{Kind: fakeband.StatusFailed, Seq: 8, Error: "again"},
	}
	reason, ok := FailedBefore(marks, 9)
	assert.True(t, ok)
	assert.Equal(t, "the model timed out", reason, "a blank reason is no failure Band would record")
	_, ok = FailedBefore(marks, 5)
	assert.False(t, ok, "a mark at seq itself is not before it")
	_, ok = FailedBefore(nil, 10)
	assert.False(t, ok)
}

func TestWindowStartIsTheLatestOfTheSayingAndTheRoomsEarlierProcessedMarks(t *testing.T) {
	assert.Equal(t, 4, WindowStart(4, 20, nil), "no other message: from the saying")
	assert.Equal(t, 9, WindowStart(4, 20, []int{0, 9, 3}), "the room's latest processed before done")
	assert.Equal(t, 4, WindowStart(4, 20, []int{25}), "a message processed after done does not count")
}

// A failed mark counts against the life that saw its reply posted, and
// only that life: a later life, which saw no reply of its own, may give
// the message up.
func TestAFailedMarkAfterTheLifeSawItsReplyIsJudged(t *testing.T) {
	got := FailedAfterReply([]Sighting{
		{Life: 1, Msg: "m1", Replied: true},
		{Life: 1, Msg: "m2", Failed: true}, // m2's reply was never seen
		{Life: 1, Msg: "m1", Failed: true}, // judged
		{Life: 2, Msg: "m3", Replied: true},
		{Life: 3, Msg: "m3", Failed: true}, // another life
		{Life: 2, Msg: "m4", Failed: true},
		{Life: 2, Msg: "m4", Replied: true}, // failed first, answered after
	})
	assert.Equal(t, []string{"m1"}, got)
}

// ground is Band's state as TurnOpen reads it.
type ground struct {
	status  map[string]string
	stopped map[string]bool
}

func (g ground) Status(_, msg string) string { return g.status[msg] }
func (g ground) Stopped(_, room string) bool { return g.stopped[room] }

func TestATurnIsOpenWhileItsLastClaimantMayRun(t *testing.T) {
	g := ground{
		status:  map[string]string{"m1": fakeband.StatusProcessing, "m2": fakeband.StatusProcessed},
		stopped: map[string]bool{},
	}
	alive := map[int]bool{2: true}
	running := func(life int) bool { return alive[life] }
	claims := []Claim{{Room: "r", Msg: "m1", Life: 1}}

	assert.False(t, TurnOpen(g, "a", nil, running), "nothing claimed")
	assert.False(t, TurnOpen(g, "a", claims, running), "its claimant is dead")
	claims = append(claims, Claim{Room: "r", Msg: "m1", Life: 2})
	assert.True(t, TurnOpen(g, "a", claims, running), "a running life claimed it last")
	assert.False(t, TurnOpen(g, "a", append(claims, Claim{Room: "r", Msg: "m1", Life: 1}), running),
		"a dead life claimed it last")

	g.stopped["r"] = true
	assert.False(t, TurnOpen(g, "a", claims, running), "its room is stopped")
	g.stopped["r"] = false

	g.status["m1"] = fakeband.StatusProcessed // a mark applied, its answer lost
	assert.False(t, TurnOpen(g, "a", claims, running), "Band holds it processed")
	assert.False(t, TurnOpen(g, "a", []Claim{{Room: "r", Msg: "m2", Life: 2}}, running))
}
