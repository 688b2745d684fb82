package fakeband

import (
	"net/http"
	"slices"
)

// RequestLog is one request to the Band API as the console shows it under
// the message it was for. Only a Band with Options.Admin keeps them, and
// only the last requestLogSize.
type RequestLog struct {
	N        int      `json:"n"`                  // rising, from 1
	Seq      int      `json:"seq"`                // the truth's sequence number when it arrived
	AgentID  string   `json:"agent_id,omitempty"` // the key's participant; "" for an unknown key
	Endpoint Endpoint `json:"endpoint"`
	Method   string   `json:"method"`
	Path     string   `json:"path"`
	RoomID   string   `json:"room_id,omitempty"`
	// MessageID is the message the path names (processing, processed,
	// failed) or, for any other request in a room, the message whose
	// attempt the agent had open there when the request arrived.
	MessageID string `json:"message_id,omitempty"`
	Status    int    `json:"status"`          // the answer's status (the one that was lost, for lost)
	Fault     string `json:"fault,omitempty"` // the kind of the fault that fired, if one did
	// Outcome is answered; lost (applied, the answer dropped by a
	// lose_response fault); abandoned (the client went away while a delay
	// held it: nothing applied); or closed (the Band closed first).
	Outcome string `json:"outcome"`
}

// Request outcomes.
const (
	OutcomeAnswered  = "answered"
	OutcomeLost      = "lost"
	OutcomeAbandoned = "abandoned"
	OutcomeClosed    = "closed"
)

// requestLogSize bounds the request log: the oldest entries go first.
const requestLogSize = 4096

// requestLog is a ring of the latest requests. Callers hold b.mu.
type requestLog struct {
	on      bool // set by New, never changed
	n       int
	entries []RequestLog // at most requestLogSize; entries[next] is the oldest once full
	next    int
}

func (l *requestLog) add(e RequestLog) {
	if len(l.entries) < requestLogSize {
		l.entries = append(l.entries, e)
		return
	}
	l.entries[l.next] = e
	l.next = (l.next + 1) % requestLogSize
}

// all returns the entries oldest first.
func (l *requestLog) all() []RequestLog {
	return slices.Concat(l.entries[l.next:], l.entries[:l.next])
}

// beginRequest opens the log entry of r, or returns nil when the Band
// keeps no log.
func (b *Band) beginRequest(ep Endpoint, r *http.Request) *RequestLog {
	if !b.log.on { // set by New alone: no lock, and no cost, without the admin API
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := &RequestLog{Seq: b.truth.seq, Endpoint: ep, Method: r.Method, Path: r.URL.Path,
		RoomID: r.PathValue("chat_id"), MessageID: r.PathValue("message_id"), Outcome: OutcomeAnswered}
	if len(e.Path) > 512 {
		e.Path = e.Path[:512]
	}
	if p := b.byKey[r.Header.Get("X-API-Key")]; p != nil {
		e.AgentID = p.id
	}
	if e.MessageID == "" && e.AgentID != "" {
		e.MessageID = b.openMessageLocked(e.AgentID, e.RoomID)
	}
	return e
}

// endRequest records the finished entry and tells the feed.
func (b *Band) endRequest(e *RequestLog) {
	if e == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log.n++
	e.N = b.log.n
	b.log.add(*e)
	published := *e
	b.feed.publishLocked(FeedEvent{Seq: b.truth.seq, Kind: FeedRequest, AgentID: e.AgentID, RoomID: e.RoomID, MessageID: e.MessageID, Request: &published})
}

// openMessageLocked is the message whose attempt the agent has open in
// the room, or "".
func (b *Band) openMessageLocked(agentID, roomID string) string {
	r := b.rooms[roomID]
	if r == nil {
		return ""
	}
	from := min(b.doneUpTo[pairKey{agentID, roomID}], len(r.messages))
	for _, m := range r.messages[from:] {
		if d := b.deliveries[deliveryKey{agentID, m.id}]; d != nil && d.open {
			return m.id
		}
	}
	return ""
}
