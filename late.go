package bandonce

import (
	"sync"
	"time"
)

// SettleWindowFactor is how many RequestTimeouts Config.SettleWindow is
// when it is zero: a count, not a duration.
const SettleWindowFactor = 2

// lateSends knows, for one Shell, when each send whose outcome is unknown
// could still land: Band may apply a POST after its sender gave up on it
// or died, up to SettleWindow after the request was written. Until then a
// read of the room that does not find the key proves nothing, so the
// guard reads only once the send has settled.
//
// What a life knows: its own unknown sends, each with the moment its POST
// returned (the request was written before that), and when it began to
// serve. Every send of an earlier life (a crashed process, a superseded
// connection, an earlier Run of this Shell) was written before this life
// began, so it has settled once SettleWindow has passed since then,
// whatever the ledger remembers of it.
type lateSends struct {
	window time.Duration

	mu    sync.Mutex
	began time.Time             // when this life began to serve rooms
	sent  map[lateKey]time.Time // this life's unknown sends: when each POST returned
	order []lateKey             // sent's keys in the order they were recorded, for pruning
	// msgs holds, per room and message, when the last unknown send made
	// for that message has settled: the message is not consumed before.
	msgs map[lateKey]time.Time
}

type lateKey struct{ room, key string }

func newLateSends(window time.Duration) *lateSends {
	return &lateSends{window: window, sent: map[lateKey]time.Time{}, msgs: map[lateKey]time.Time{}}
}

// begin starts a life at now: everything sent before now belongs to an
// earlier life.
func (l *lateSends) begin(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.began = now
}

// beginOnce starts a life at now unless one has begun: a Shell that
// never runs but replays dead letters is a life of its own, and every
// send of an earlier one (a crashed replay among them) was written before
// it began.
func (l *lateSends) beginOnce(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.began.IsZero() {
		l.began = now
	}
}

// unknown records that a send of key in room for message msg, whose POST
// returned at now without an answer that says whether it landed, may
// still land.
func (l *lateSends) unknown(room, msg, key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lateKey{room, key}
	l.sent[k] = now
	l.order = append(l.order, k)
	l.msgs[lateKey{room, msg}] = now.Add(l.window)
	l.pruneLocked(now)
}

// settledAt is when a read of the room for key may trust the key's
// absence: the window after this life's last unknown send of it, or, for
// a message an earlier life may have attempted (inherited), after this
// life began.
//
// A message this life has handled from its first attempt waits only for
// this life's own sends: an earlier life could have sent the key only for
// another message of the room, and the shell never consumes a message
// while a send of it may still land (see messageSettledAt), so that
// message, unsettled, would still be ahead of this one in the room.
func (l *lateSends) settledAt(room, key string, inherited bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var from time.Time
	if inherited {
		from = l.began
	}
	if at, ok := l.sent[lateKey{room, key}]; ok && at.After(from) {
		from = at
	}
	if from.IsZero() {
		return from
	}
	return from.Add(l.window)
}

// messageSettledAt is when every send made for msg has settled: this
// life's, and, for a message an earlier life may have attempted
// (inherited), the earlier life's, which have settled once the window has
// passed since this life began. It is the zero time when there is nothing
// to wait for.
func (l *lateSends) messageSettledAt(room, msg string, inherited bool, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lateKey{room, msg}
	at := l.msgs[k]
	if !now.Before(at) {
		delete(l.msgs, k)
		at = time.Time{}
	}
	if earlier := l.began.Add(l.window); inherited && now.Before(earlier) && earlier.After(at) {
		at = earlier
	}
	return at
}

// pruneLocked forgets the sends that have settled, oldest first: a
// settled send's record would only say to wait for nothing. A key sent
// again keeps its first place in order, so pruning may pause at it; the
// records are still bounded by the sends of one window.
func (l *lateSends) pruneLocked(now time.Time) {
	for len(l.order) > 0 {
		k := l.order[0]
		if at, ok := l.sent[k]; ok && now.Before(at.Add(l.window)) {
			return
		}
		delete(l.sent, k)
		l.order = l.order[1:]
	}
	for k, at := range l.msgs {
		if !now.Before(at) {
			delete(l.msgs, k)
		}
	}
}
