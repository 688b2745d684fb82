package fakeband

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// What the console reads: the rooms with their counts, and one room's
// timeline with each message's life. Both are taken under one lock, from
// the same records as the truth.

// Timeline bounds: how many items a timeline answers (the latest ones),
// and how many requests each message's life lists (the latest ones).
const (
	defaultTimelineItems = 200
	maxTimelineItems     = 1000
	maxLifeRequests      = 50
)

type roomListedJSON struct {
	roomSetupJSON
	// Items counts the room's messages and events; LastSeq is the truth's
	// sequence number of the newest (0 for none). Stopped lists the agents
	// stopped there.
	Items   int      `json:"items"`
	LastSeq int      `json:"last_seq"`
	Stopped []string `json:"stopped"`
}

// adminRooms lists the rooms in creation order, for the console's list
// and its unread counts.
func (b *Band) adminRooms(*http.Request) (int, any, *Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []roomListedJSON{}
	for _, id := range b.roomOrder {
		rm := b.rooms[id]
		l := roomListedJSON{roomSetupJSON: roomSetupJSON{ID: rm.id, Title: rm.title, OwnerID: rm.ownerID, Members: b.membersLocked(rm)},
			Items: len(rm.messages), Stopped: []string{}}
		if n := len(rm.messages); n > 0 {
			l.LastSeq = b.seqsLocked(rm)[rm.messages[n-1].id]
		}
		for _, pid := range rm.order {
			if b.stoppedLocked(pid, rm.id) {
				l.Stopped = append(l.Stopped, pid)
			}
		}
		out = append(out, l)
	}
	return http.StatusOK, out, nil
}

// seqsLocked maps the room's message and event ids to their truth seq.
func (b *Band) seqsLocked(rm *room) map[string]int {
	seqs := make(map[string]int, len(rm.messages))
	for _, p := range b.truth.posts[rm.id] {
		seqs[p.ID] = p.Seq
	}
	for _, e := range b.truth.chatEvents[rm.id] {
		seqs[e.ID] = e.Seq
	}
	return seqs
}

type createRoomRequest struct {
	Title   string   `json:"title"`
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// adminCreateRoom creates a room owned by a human (the operator unless
// "owner" names another), with the members named.
func (b *Band) adminCreateRoom(r *http.Request) (int, any, *Error) {
	var req createRoomRequest
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	if isBlank(req.Title) || len(req.Title) > 200 {
		return 0, nil, unprocessable("validation_error", "title is required, at most 200 bytes", "/title", "is invalid")
	}
	if len(req.Members) > 100 {
		return 0, nil, unprocessable("validation_error", "at most 100 members", "/members", "is too long")
	}
	b.mu.Lock()
	owner := b.owner
	if req.Owner != "" {
		p, err := b.participantByRefLocked(req.Owner)
		if err != nil {
			b.mu.Unlock()
			return 0, nil, err
		}
		if p.isAgent() {
			b.mu.Unlock()
			return 0, nil, unprocessable("validation_error", strconv.Quote(req.Owner)+" is an agent: a room's owner is a human", "/owner", "is not a human")
		}
		owner = p
	}
	ids := []string{}
	for _, ref := range req.Members {
		p, err := b.participantByRefLocked(ref)
		if err != nil {
			b.mu.Unlock()
			return 0, nil, err
		}
		ids = append(ids, p.id)
	}
	b.mu.Unlock()
	made := b.AddRoom(req.Title, Human{ID: owner.id}, ids...)
	b.mu.Lock()
	defer b.mu.Unlock()
	rm := b.rooms[made.ID]
	return http.StatusCreated, roomSetupJSON{ID: rm.id, Title: rm.title, OwnerID: rm.ownerID, Members: b.membersLocked(rm)}, nil
}

type nameJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type timelineJSON struct {
	Room       roomSetupJSON        `json:"room"`
	Executions []executionTruthJSON `json:"executions"`
	Items      []timelineItemJSON   `json:"items"`
	Earlier    int                  `json:"earlier"` // items before the first one answered
	Seq        int                  `json:"seq"`     // the truth's sequence number of this snapshot
}

// timelineItemJSON is a message or an event as people see it, with its
// life for each agent it was delivered to.
type timelineItemJSON struct {
	Seq        int             `json:"seq"`
	ID         string          `json:"id"`
	Type       string          `json:"type"` // text, or an event type
	SenderID   string          `json:"sender_id"`
	SenderName string          `json:"sender_name"`
	SenderType string          `json:"sender_type"`
	Content    string          `json:"content"` // as stored, markers included
	Text       string          `json:"text"`    // mention markers as @name, the dedup line left out
	Mentions   []nameJSON      `json:"mentions"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	// DedupKey is the key of the reply's [dedup_key:KEY] line or of an
	// event's metadata.dedup_key; ReplyTo the message it answers: the one
	// its key names, else the one whose attempt its sender had open.
	DedupKey string `json:"dedup_key,omitempty"`
	ReplyTo  string `json:"reply_to,omitempty"`
	// Copies counts the sender's posts in the room with this dedup key:
	// 2 or more is a reply posted twice.
	Copies int `json:"copies,omitempty"`
	// Replies are the agents' posts and events that answer this message;
	// PostedTwice is set when one of them is a reply posted twice.
	Replies     []string   `json:"replies"`
	PostedTwice bool       `json:"posted_twice"`
	Life        []lifeJSON `json:"life"`
}

// lifeJSON is one agent's delivery of a message: its status, attempts,
// the marks applied, and the requests the agent made for it.
type lifeJSON struct {
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	Open      bool   `json:"open"` // an attempt is open
	// Held is set while the message waits because the agent is stopped
	// in the room: delivered or processing, and the execution stopped.
	Held bool `json:"held"`
	// Reason is the error of the last failed mark: a dead letter's reason
	// once the message is failed.
	Reason        string          `json:"reason,omitempty"`
	Marks         []markTruthJSON `json:"marks"`
	Requests      []RequestLog    `json:"requests"`       // the latest maxLifeRequests
	RequestsTotal int             `json:"requests_total"` // all of them the log still holds
}

// adminTimeline answers one room's timeline: GET /timeline?room=R[&limit=N].
func (b *Band) adminTimeline(r *http.Request) (int, any, *Error) {
	limit := defaultTimelineItems
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxTimelineItems {
			return 0, nil, unprocessable("validation_error", "limit must be 1.."+strconv.Itoa(maxTimelineItems), "/limit", "is invalid")
		}
		limit = n
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rm, err := b.roomByRefLocked(r.URL.Query().Get("room"))
	if err != nil {
		return 0, nil, err
	}
	out := timelineJSON{Room: roomSetupJSON{ID: rm.id, Title: rm.title, OwnerID: rm.ownerID, Members: b.membersLocked(rm)},
		Executions: []executionTruthJSON{}, Items: []timelineItemJSON{}, Seq: b.truth.seq}
	for _, pid := range rm.order {
		if e := b.executions[pairKey{pid, rm.id}]; e != nil {
			out.Executions = append(out.Executions, executionTruthJSON{ID: e.id, AgentID: pid, RoomID: rm.id, Stopped: e.stopped, Working: e.working})
		}
	}
	msgs := rm.messages
	if len(msgs) > limit {
		out.Earlier = len(msgs) - limit
		msgs = msgs[out.Earlier:]
	}
	seqs := b.seqsLocked(rm)
	requests := map[deliveryKey][]RequestLog{}
	for _, q := range b.log.all() {
		if q.MessageID != "" {
			k := deliveryKey{q.AgentID, q.MessageID}
			requests[k] = append(requests[k], q)
		}
	}
	opens := b.openIntervalsLocked(rm)
	index := map[string]int{}
	copies := map[[2]string]int{}
	for _, m := range rm.messages {
		if key := dedupKeyOf(m); key != "" && m.kind == TypeText && m.sender.isAgent() {
			copies[[2]string{m.sender.id, key}]++
		}
	}
	for _, m := range msgs {
		it := timelineItemJSON{Seq: seqs[m.id], ID: m.id, Type: m.kind, SenderID: m.sender.id, SenderName: m.sender.name,
			SenderType: m.sender.kind, Content: m.content, Text: b.displayTextLocked(m), Mentions: []nameJSON{},
			Metadata: m.metadata, DedupKey: dedupKeyOf(m), Replies: []string{}, Life: []lifeJSON{}}
		for _, mn := range m.mentions {
			it.Mentions = append(it.Mentions, nameJSON{ID: mn.p.id, Name: mn.p.name})
		}
		if m.sender.isAgent() {
			it.ReplyTo = replyTarget(seqs, m, it.DedupKey, it.Seq, opens[m.sender.id])
			if it.DedupKey != "" && m.kind == TypeText {
				it.Copies = copies[[2]string{m.sender.id, it.DedupKey}]
			}
		}
		for _, rid := range m.recipients {
			if p := b.participants[rid]; p.isAgent() {
				it.Life = append(it.Life, b.lifeLocked(rm, m, p, requests[deliveryKey{p.id, m.id}]))
			}
		}
		index[m.id] = len(out.Items)
		out.Items = append(out.Items, it)
	}
	for _, it := range out.Items {
		if i, ok := index[it.ReplyTo]; ok {
			out.Items[i].Replies = append(out.Items[i].Replies, it.ID)
			if it.Copies > 1 {
				out.Items[i].PostedTwice = true
			}
		}
	}
	return http.StatusOK, out, nil
}

// lifeLocked is the agent's life of the message; requests are the
// agent's requests for it, oldest first.
func (b *Band) lifeLocked(rm *room, m *message, p *participant, requests []RequestLog) lifeJSON {
	d := b.deliveries[deliveryKey{p.id, m.id}]
	l := lifeJSON{AgentID: p.id, AgentName: p.name, Status: d.status, Attempts: d.attempts, Open: d.open,
		Marks: []markTruthJSON{}, Requests: []RequestLog{}}
	l.Held = (d.status == StatusDelivered || d.status == StatusProcessing) && b.stoppedLocked(p.id, rm.id)
	for _, mk := range b.truth.marks[deliveryKey{p.id, m.id}] {
		l.Marks = append(l.Marks, markTruthJSON(mk))
		if mk.Kind == StatusFailed {
			l.Reason = mk.Error
		}
	}
	l.RequestsTotal = len(requests)
	l.Requests = append(l.Requests, requests[max(0, len(requests)-maxLifeRequests):]...)
	return l
}

// interval is a span of truth seqs in which an agent had an attempt on a
// message open; to is 0 while it still is.
type interval struct {
	messageID string
	from, to  int
}

// openIntervalsLocked lists, per agent, the spans in which it had an
// attempt open on one of the room's messages.
func (b *Band) openIntervalsLocked(rm *room) map[string][]interval {
	out := map[string][]interval{}
	for _, m := range rm.messages {
		for _, rid := range m.recipients {
			var open *interval
			for _, mk := range b.truth.marks[deliveryKey{rid, m.id}] {
				switch {
				case mk.Kind == StatusProcessing && open == nil:
					open = &interval{messageID: m.id, from: mk.Seq}
				case mk.Kind != StatusProcessing && open != nil:
					open.to = mk.Seq
					out[rid] = append(out[rid], *open)
					open = nil
				}
			}
			if open != nil {
				out[rid] = append(out[rid], *open)
			}
		}
	}
	return out
}

// replyTarget is the message an agent's post or event answers: the one
// its dedup key names (the key is the message id, or ends in ":" and the
// id, as band-once's and echo's keys do), else the one whose attempt the
// agent had open when it posted. inRoom holds the room's message ids.
func replyTarget(inRoom map[string]int, m *message, key string, seq int, opens []interval) string {
	if key != "" {
		id := key[strings.LastIndexByte(key, ':')+1:]
		if _, ok := inRoom[id]; ok && id != m.id {
			return id
		}
	}
	for _, o := range opens {
		if o.from < seq && (o.to == 0 || seq < o.to) {
			return o.messageID
		}
	}
	return ""
}

// dedupKeyOf reads a text message's [dedup_key:KEY] last line, or an
// event's metadata.dedup_key.
func dedupKeyOf(m *message) string {
	if m.kind != TypeText {
		var meta struct {
			Key string `json:"dedup_key"`
		}
		if json.Unmarshal(m.metadata, &meta) == nil {
			return meta.Key
		}
		return ""
	}
	_, key := splitMarker(m.content)
	return key
}

// splitMarker cuts the [dedup_key:KEY] last line off content.
func splitMarker(content string) (rest, key string) {
	trimmed := strings.TrimRight(content, " \t\r\n")
	last, head := trimmed, ""
	if i := strings.LastIndexByte(trimmed, '\n'); i >= 0 {
		head, last = trimmed[:i], trimmed[i+1:]
	}
	last = strings.TrimSpace(last)
	const prefix, suffix = "[dedup_key:", "]"
	if !strings.HasPrefix(last, prefix) || !strings.HasSuffix(last, suffix) || len(last) <= len(prefix)+len(suffix) {
		return content, ""
	}
	return head, last[len(prefix) : len(last)-len(suffix)]
}

var markerToken = regexp.MustCompile(`@\[\[([0-9a-fA-F-]{1,64})\]\]`)

// displayTextLocked is the content as a person reads it: each mention
// marker as @name, without the dedup line.
func (b *Band) displayTextLocked(m *message) string {
	text := m.content
	if m.kind == TypeText {
		text, _ = splitMarker(text)
	}
	return strings.TrimSpace(markerToken.ReplaceAllStringFunc(text, func(tok string) string {
		id := markerToken.FindStringSubmatch(tok)[1]
		if p := b.participants[id]; p != nil {
			return "@" + p.name
		}
		return tok
	}))
}
