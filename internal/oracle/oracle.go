// Package oracle is what the judges of the kill-storm engines share:
// package proof (virtual time, in process), internal/procverify (a real
// process, wall-clock time) and package verify. They judge from the fake
// Band's ground truth (package fakeband), never from the agent's account.
//
// The dedup-marker reader here is deliberately not the shell's
// (internal/lifecycle.ParseMarker): a bug in the shell's reader must show up as
// a violation, not hide itself by judging with the same mistake.
package oracle

import (
	"fmt"
	"strings"

	"github.com/band-once/bandonce/fakeband"
)

// MarkerKey reads the dedup marker, [dedup_key:KEY], on the last line of
// a reply, as Band's convention writes it.
func MarkerKey(content string) (string, bool) {
	content = strings.TrimRight(content, " \t\r\n")
	last := content
	if i := strings.LastIndexByte(content, '\n'); i >= 0 {
		last = content[i+1:]
	}
	last = strings.TrimSpace(last)
	const prefix, suffix = "[dedup_key:", "]"
	if !strings.HasPrefix(last, prefix) || !strings.HasSuffix(last, suffix) || len(last) <= len(prefix)+len(suffix) {
		return "", false
	}
	return last[len(prefix) : len(last)-len(suffix)], true
}

// The helpers below read one message's marks, as fakeband.Band.Marks
// returns them: in the order they were stored, seq rising.

// ProcessedSeq is the seq of the message's processed mark, or 0.
func ProcessedSeq(marks []fakeband.Mark) int {
	for _, mk := range marks {
		if mk.Kind == fakeband.StatusProcessed {
			return mk.Seq
		}
	}
	return 0
}

// OpenAt reports whether the message had an attempt open at seq: its last
// mark at or before seq is a processing one.
func OpenAt(marks []fakeband.Mark, seq int) bool {
	open := false
	for _, mk := range marks {
		if mk.Seq > seq {
			break
		}
		open = mk.Kind == fakeband.StatusProcessing
	}
	return open
}

// FailedBefore returns the reason of the message's first failed mark
// before seq, and whether there is one: a failure Band recorded, which
// charges the message's budget. Band refuses a failed mark without a
// reason, so a mark with a blank one is not taken for a failure.
func FailedBefore(marks []fakeband.Mark, seq int) (reason string, ok bool) {
	for _, mk := range marks {
		if mk.Seq >= seq {
			break
		}
		if mk.Kind == fakeband.StatusFailed && strings.TrimSpace(mk.Error) != "" {
			return mk.Error, true
		}
	}
	return "", false
}

// WindowStart is where a message's turn can have begun, as a seq: after
// the message was said (said) and after the latest of its room's other
// messages processed before done (processed holds their processed seqs,
// 0 for none).
func WindowStart(said, done int, processed []int) int {
	start := said
	for _, p := range processed {
		if p < done && p > start {
			start = p
		}
	}
	return start
}

// ClaimedBetween reports whether the message had an attempt opened in
// (from, to): a new turn, which may answer it again.
func ClaimedBetween(marks []fakeband.Mark, from, to int) bool {
	for _, mk := range marks {
		if mk.Kind == fakeband.StatusProcessing && mk.Seq > from && mk.Seq < to {
			return true
		}
	}
	return false
}

// Judgement tallies an oracle's verdict on one schedule: how many cases
// each rule I judged and failed, the first failure of each (V, the
// engine's violation, made by the function given to NewJudgement), and
// the message totals the receipt reports.
type Judgement[I comparable, V any] struct {
	Checks, Violated map[I]int
	Found            map[I]V
	// DoublePosts counts replies beyond the first; Lost the messages left
	// pending or without their due reply; Interrupted those an interrupt
	// consumed before their reply.
	DoublePosts, Lost, Interrupted int

	violation func(inv I, reason string) V
}

// NewJudgement returns an empty tally whose failures are made by
// violation.
func NewJudgement[I comparable, V any](violation func(inv I, reason string) V) *Judgement[I, V] {
	return &Judgement[I, V]{Checks: map[I]int{}, Violated: map[I]int{}, Found: map[I]V{}, violation: violation}
}

// Check counts one case judged by inv.
func (j *Judgement[I, V]) Check(inv I) { j.Checks[inv]++ }

// Fail counts one case inv failed, and keeps the reason if it is inv's
// first.
func (j *Judgement[I, V]) Fail(inv I, format string, args ...any) {
	j.Violated[inv]++
	if _, ok := j.Found[inv]; !ok {
		j.Found[inv] = j.violation(inv, fmt.Sprintf(format, args...))
	}
}

// First is the failure of the first rule in order that failed, or V's
// zero value.
func (j *Judgement[I, V]) First(order []I) V {
	for _, inv := range order {
		if f, ok := j.Found[inv]; ok {
			return f
		}
	}
	var none V
	return none
}

// A Sighting is one thing a life of the agent did or saw of a message, in
// the order the judge observed them: its reply POST answered 2xx (the
// life knows the reply is posted), or a failed mark it sent.
type Sighting struct {
	Life    int
	Msg     string
	Replied bool // the life saw its reply POST answered 2xx
	Failed  bool // the life sent a failed mark
}

// FailedAfterReply returns, in order, the messages a life marked failed
// after it saw their reply posted: a failed acknowledgement (or any
// later trouble) made into a failure of work that was done. A later life
// that marks one failed saw no reply of its own and is not judged here.
func FailedAfterReply(seen []Sighting) []string {
	type lifeMsg struct {
		life int
		msg  string
	}
	replied := map[lifeMsg]bool{}
	var out []string
	for _, s := range seen {
		k := lifeMsg{s.Life, s.Msg}
		switch {
		case s.Replied:
			replied[k] = true
		case s.Failed && replied[k]:
			out = append(out, s.Msg)
		}
	}
	return out
}

// A Claim is a processing mark a life of the agent sent for a message,
// in the order the engine saw them.
type Claim struct {
	Room, Msg string
	Life      int
}

// Ground is what TurnOpen reads of Band's state; *fakeband.Band is one.
type Ground interface {
	Status(agentID, messageID string) string
	Stopped(agentID, roomID string) bool
}

// TurnOpen reports whether the agent has a turn open: a message Band
// holds in processing, in a room not stopped, whose last claim came from
// a life that may still run (running). It reads Band's state rather than
// the answers the agent got, so a mark applied with its answer lost
// closes the turn, and so does another replica's mark. An engine waits
// for such a turn's next request before it fires an event aimed at a
// kind of request, or a slow agent would never meet one.
func TurnOpen(band Ground, agentID string, claims []Claim, running func(life int) bool) bool {
	type key struct{ room, msg string }
	last := make(map[key]int, len(claims))
	for _, c := range claims {
		last[key{c.Room, c.Msg}] = c.Life
	}
	for k, life := range last {
		if running(life) && band.Status(agentID, k.msg) == fakeband.StatusProcessing && !band.Stopped(agentID, k.room) {
			return true
		}
	}
	return false
}
