package fakeband

import (
	"net/http"
)

// messagesMetaJSON is the metadata of GET .../messages: the cursor (or
// deprecated page) fields and the status filter applied.
type messagesMetaJSON struct {
	cursorMetaJSON
	StatusFilter *string `json:"status_filter"`
}

// statusFilters are GET .../messages's status values and what each keeps,
// as Band's document tabulates them (listAgentMessages).
var statusFilters = map[string]func(d *delivery) bool{
	"":           func(d *delivery) bool { return d.status != StatusProcessed },                                        // everything not processed
	"pending":    func(d *delivery) bool { return d.status == StatusDelivered || d.status == StatusFailed && !d.open }, // untouched, or failed with no attempt open
	"processing": func(d *delivery) bool { return d.status == StatusProcessing },
	"processed":  func(d *delivery) bool { return d.status == StatusProcessed },
	"failed":     func(d *delivery) bool { return d.status == StatusFailed },
	"all":        func(*delivery) bool { return true },
}

// serveMessages lists the messages delivered to the agent in the room,
// filtered by status, oldest first: the official SDKs' crash-recovery
// sweep asks for status=processing at start.
func (b *Band) serveMessages(c *call) reply {
	q := c.r.URL.Query()
	status := q.Get("status")
	keepStatus, ok := statusFilters[status]
	if !ok {
		return errReply(unprocessable("validation_error", "status must be pending, processing, processed, failed or all", "/status", "is invalid"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	keep := func(m *message) bool {
		d := b.deliveries[deliveryKey{c.who.id, m.id}]
		return d != nil && keepStatus(d)
	}
	items, meta, deprecated, err := listLocked(r, q, messagesLimitDefault, keep)
	if err != nil {
		return errReply(err)
	}
	out := messagesMetaJSON{cursorMetaJSON: meta}
	if status != "" {
		out.StatusFilter = &status
	}
	return reply{status: http.StatusOK, data: items, meta: out, deprecated: deprecated}
}

// serveActivity records the agent's working indicator for the room. Band
// answers 404 when the agent has no execution there; in the fake every
// agent in a room has one, stopped or not.
func (b *Band) serveActivity(c *call) reply {
	var body struct {
		Working *bool `json:"working"`
	}
	bodyErr := decodeBody(c.r, &body)
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(notFound("active execution"))
	}
	if bodyErr != nil || body.Working == nil {
		return errReply(unprocessable("validation_error", `body must be {"working": true|false}`, "/working", "must be a boolean"))
	}
	e := b.executions[pairKey{c.who.id, r.id}]
	e.working = *body.Working
	detail := "idle"
	if e.working {
		detail = "working"
	}
	b.truth.record(Event{Kind: EventActivity, AgentID: c.who.id, RoomID: r.id, Detail: detail})
	return okReply(http.StatusOK, activityJSON{Working: e.working})
}

// messagesLimitDefault is GET .../messages's page size without limit.
const messagesLimitDefault = 20
