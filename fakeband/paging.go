package fakeband

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
)

// Limits of the paged endpoints.
const (
	chatsPageSizeDefault = 20
	contextLimitDefault  = 50
	maxPageSize          = 100
)

type pageMetaJSON struct {
	Page       int `json:"page"`
	PageSize   int `json:"page_size"`
	TotalCount int `json:"total_count"`
	TotalPages int `json:"total_pages"`
}

type cursorMetaJSON struct {
	NextCursor *string `json:"next_cursor"`
	HasMore    bool    `json:"has_more"`
	Limit      int     `json:"limit"`
	// The deprecated page fields, only when the request paged by page.
	Page       *int `json:"page,omitempty"`
	PageSize   *int `json:"page_size,omitempty"`
	TotalCount *int `json:"total_count,omitempty"`
	TotalPages *int `json:"total_pages,omitempty"`
}

// intParam reads a positive integer query parameter, no larger than max
// unless max is 0; absent means def. Anything else is a 422 naming it.
func intParam(q url.Values, name string, def, max int) (int, *Error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || (max > 0 && n > max) {
		msg := "must be a positive integer"
		if max > 0 {
			msg = "must be an integer from 1 to " + strconv.Itoa(max)
		}
		return 0, unprocessable("validation_error", name+" "+msg, "/"+name, msg)
	}
	return n, nil
}

// chatsLocked is one page of the agent's rooms, in creation order.
func (b *Band) chatsLocked(agent *participant, q url.Values) ([]roomJSON, pageMetaJSON, *Error) {
	page, err := intParam(q, "page", 1, 0)
	if err != nil {
		return nil, pageMetaJSON{}, err
	}
	size, err := intParam(q, "page_size", chatsPageSizeDefault, maxPageSize)
	if err != nil {
		return nil, pageMetaJSON{}, err
	}
	var mine []*room
	for _, id := range b.roomOrder {
		if r := b.rooms[id]; r.has(agent.id) {
			mine = append(mine, r)
		}
	}
	meta := pageMetaJSON{Page: page, PageSize: size, TotalCount: len(mine), TotalPages: (len(mine) + size - 1) / size}
	items := []roomJSON{}
	if page <= meta.TotalPages { // compared before multiplying: page may be huge
		start := (page - 1) * size
		for _, r := range mine[start:min(start+size, len(mine))] {
			items = append(items, renderRoom(r))
		}
	}
	return items, meta, nil
}

// A context cursor is the room position to resume from. Positions only
// grow as messages are appended, so a cursor never goes stale.
const cursorPrefix = "pos:"

func encodeCursor(pos int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(pos)))
}

// cursorStart is where the page that q's cursor names starts among total
// items: 0 without a cursor, an invalid_cursor error for one this fake
// did not hand out or that points past the end.
func cursorStart(q url.Values, total int) (int, *Error) {
	cur := q.Get("cursor")
	if cur == "" {
		return 0, nil
	}
	start, ok := decodeCursor(cur, total)
	if !ok {
		return 0, unprocessable("invalid_cursor", "cursor is invalid", "/cursor", "is invalid")
	}
	return start, nil
}

func decodeCursor(s string, max int) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(raw), cursorPrefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(raw), cursorPrefix))
	if err != nil || n < 0 || n > max {
		return 0, false
	}
	return n, true
}

// contextLocked is one page of the agent's view of the room: its own
// messages and events and the text messages that mention it, oldest first.
func (b *Band) contextLocked(agent *participant, roomID string, q url.Values) ([]chatMessageJSON, cursorMetaJSON, bool, *Error) {
	r, err := b.memberRoom(roomID, agent)
	if err != nil {
		return nil, cursorMetaJSON{}, false, err
	}
	inView := func(m *message) bool { return m.sender == agent || m.mentionsAgent(agent.id) }
	return listLocked(r, q, contextLimitDefault, inView)
}

// listLocked is one page of the room's messages that keep holds for,
// oldest first: from the cursor on, or, when the request pages the
// deprecated way (page or page_size, no cursor), that page of them, with
// page metadata and deprecated true.
func listLocked(r *room, q url.Values, defLimit int, keep func(*message) bool) ([]chatMessageJSON, cursorMetaJSON, bool, *Error) {
	if q.Get("cursor") == "" && (q.Has("page") || q.Has("page_size")) {
		items, meta, err := pageLocked(r, q, defLimit, keep)
		return items, meta, true, err
	}
	limit, err := intParam(q, "limit", defLimit, maxPageSize)
	if err != nil {
		return nil, cursorMetaJSON{}, false, err
	}
	pos := 0
	if c := q.Get("cursor"); c != "" {
		var ok bool
		if pos, ok = decodeCursor(c, len(r.messages)); !ok {
			return nil, cursorMetaJSON{}, false, unprocessable("invalid_cursor", "cursor is invalid", "/cursor", "is invalid")
		}
	}
	items := []chatMessageJSON{}
	meta := cursorMetaJSON{Limit: limit}
	for ; pos < len(r.messages); pos++ {
		m := r.messages[pos]
		if !keep(m) {
			continue
		}
		if len(items) == limit {
			meta.HasMore = true
			next := encodeCursor(pos)
			meta.NextCursor = &next
			break
		}
		items = append(items, renderMessage(m))
	}
	return items, meta, false, nil
}

// pageLocked pages by page number, as Band still does (deprecated, to be
// removed in API 2.0.0) for the official SDKs that ask that way.
func pageLocked(r *room, q url.Values, defLimit int, keep func(*message) bool) ([]chatMessageJSON, cursorMetaJSON, *Error) {
	page, err := intParam(q, "page", 1, 0)
	if err != nil {
		return nil, cursorMetaJSON{}, err
	}
	size, err := intParam(q, "page_size", defLimit, maxPageSize)
	if err != nil {
		return nil, cursorMetaJSON{}, err
	}
	var all []*message
	for _, m := range r.messages {
		if keep(m) {
			all = append(all, m)
		}
	}
	total, pages := len(all), (len(all)+size-1)/size
	items := []chatMessageJSON{}
	if page <= pages {
		start := (page - 1) * size
		for _, m := range all[start:min(start+size, total)] {
			items = append(items, renderMessage(m))
		}
	}
	meta := cursorMetaJSON{Limit: size, HasMore: page < pages, Page: &page, PageSize: &size, TotalCount: &total, TotalPages: &pages}
	return items, meta, nil
}
