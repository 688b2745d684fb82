package fakeband

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The live feed: GET /_admin/feed streams the Band's changes as
// server-sent events, for the console (see console.go) or any client that
// wants to wait for a change rather than poll the truth. Each event's data
// is one FeedEvent in JSON; its id is the event's N.
//
// The feed never slows the Band: a change is handed to every subscriber
// without waiting, and a subscriber whose buffer (feedBuffer changes) is
// full is dropped, with a final "reset" event telling it to read the
// snapshot again and reconnect. At most maxFeedSubscribers streams are open
// at once (503 feed_full beyond); a write that does not finish within
// feedWriteTimeout ends the stream; a comment every feedHeartbeat finds
// clients that went away. Streaming needs a listener (Listen): in memory
// (HTTPClient) the feed answers its hello and ends.
const (
	maxFeedSubscribers = 16
	feedBuffer         = 256
	feedWriteTimeout   = 10 * time.Second
	feedHeartbeat      = 15 * time.Second
	feedRetryMillis    = 1000
)

// FeedEvent is one change on the live feed. Kind is one of the truth's
// event kinds (EventPost, EventMark, EventStop, ...) with that event's
// Seq and fields, or "request" for an agent's request (Request set), or
// "faults" when the fault rules or the rate limit changed.
type FeedEvent struct {
	N         int         `json:"n"`   // the feed's own count, rising
	Seq       int         `json:"seq"` // the truth's sequence number at the change
	Kind      string      `json:"kind"`
	AgentID   string      `json:"agent_id,omitempty"`
	RoomID    string      `json:"room_id,omitempty"`
	MessageID string      `json:"message_id,omitempty"`
	Detail    string      `json:"detail,omitempty"`
	Request   *RequestLog `json:"request,omitempty"`
}

// Feed kinds beside the truth's event kinds.
const (
	FeedRequest = "request" // an agent's request was answered (or lost)
	FeedFaults  = "faults"  // the fault rules or the rate limit changed
)

// feed is the set of live subscribers. Callers hold b.mu.
type feed struct {
	on   bool // only with Options.Admin: nobody else can subscribe
	n    int
	subs map[*subscriber]struct{}
}

// subscriber is one open stream. ch is never closed; lagged is closed
// when the subscriber fell behind and was dropped.
type subscriber struct {
	ch     chan FeedEvent
	lagged chan struct{}
}

// publishLocked hands e to every subscriber without blocking, dropping
// the ones whose buffer is full.
func (f *feed) publishLocked(e FeedEvent) {
	if !f.on {
		return
	}
	f.n++
	e.N = f.n
	for s := range f.subs {
		select {
		case s.ch <- e:
		default:
			close(s.lagged)
			delete(f.subs, s)
		}
	}
}

// noteFaultsLocked publishes a fault or rate-limit change, and notes
// whether a rule may now hold a request.
func (b *Band) noteFaultsLocked() {
	b.mayHold.Store(holdsRequests(b.faults.rules))
	b.feed.publishLocked(FeedEvent{Seq: b.truth.seq, Kind: FeedFaults})
}

var errFeedFull = &Error{Status: http.StatusServiceUnavailable, Code: "feed_full",
	Message: "the live feed has " + strconv.Itoa(maxFeedSubscribers) + " subscribers already"}

// serveFeed streams the changes as server-sent events until the client
// goes, falls behind, or the Band closes.
func (b *Band) serveFeed(w http.ResponseWriter, r *http.Request) {
	if e := adminRefusal(r); e != nil {
		writeAdminError(w, e)
		return
	}
	s := &subscriber{ch: make(chan FeedEvent, feedBuffer), lagged: make(chan struct{})}
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		writeAdminError(w, errClosedBand)
		return
	case len(b.feed.subs) >= maxFeedSubscribers:
		b.mu.Unlock()
		writeAdminError(w, errFeedFull)
		return
	}
	b.feed.subs[s] = struct{}{}
	seq := b.truth.seq
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.feed.subs, s)
		b.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve another request
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	send := func(frame string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(feedWriteTimeout)) // in memory there is none, nor a flush: the stream ends after its hello
		if _, err := w.Write([]byte(frame)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	hello, _ := json.Marshal(map[string]int{"seq": seq})
	if !send("retry: " + strconv.Itoa(feedRetryMillis) + "\nevent: hello\ndata: " + string(hello) + "\n\n") {
		return
	}
	beat := time.NewTicker(feedHeartbeat)
	defer beat.Stop()
	for {
		select {
		case e := <-s.ch:
			data, err := json.Marshal(e)
			if err != nil || !send("id: "+strconv.Itoa(e.N)+"\ndata: "+string(data)+"\n\n") {
				return
			}
		case <-s.lagged:
			send("event: reset\ndata: {}\n\n")
			return
		case <-beat.C:
			if !send(": ping\n\n") {
				return
			}
		case <-r.Context().Done():
			return
		case <-b.closing:
			return
		}
	}
}
