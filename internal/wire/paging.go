package wire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// MaxPages bounds every walk through a paged listing (a room's context,
// the agent's rooms, its peers): a server that keeps announcing more pages
// is stopped there. Ten thousand pages of a hundred items is a million,
// far beyond any room or agent.
const MaxPages = 10_000

// Why a walk stopped early; a *PagingError matches one of them.
var (
	// ErrCursorRepeated: the server pointed the walk back at a page it
	// had already served (a next_cursor seen before, or a page of items
	// all read already), so following it would never end.
	ErrCursorRepeated = errors.New("band: paging: the server repeated a page already read")
	// ErrTooManyPages: the walk reached MaxPages and more were announced.
	ErrTooManyPages = errors.New("band: paging: more pages than the limit")
)

// PagingError reports a walk through pages that was stopped: the server
// repeated a page, or announced more than MaxPages.
type PagingError struct {
	// Endpoint names the call, such as "GET /agent/chats/{id}/context".
	Endpoint string
	// URL is where the pages came from: the base URL and the templated
	// path, with no id, query or key in it.
	URL string
	// Pages is how many pages were read before the walk stopped.
	Pages int
	// Err is ErrCursorRepeated or ErrTooManyPages.
	Err error
}

// Error names the URL, the pages read and why the walk stopped.
func (e *PagingError) Error() string {
	return fmt.Sprintf("band: %s: stopped after %d page(s) of %s: %v", e.Endpoint, e.Pages, e.URL, e.Err)
}

// Unwrap returns ErrCursorRepeated or ErrTooManyPages.
func (e *PagingError) Unwrap() error { return e.Err }

// Pager guards one walk through pages: every loop over pages, here and in
// package band, goes through one, so none follows a repeated cursor or
// walks past its bound. It remembers every cursor asked, so a walk costs
// memory in the pages it reads, which the bound caps.
type Pager struct {
	endpoint, url string
	pages, max    int
	seen          map[string]bool
}

// NewPager starts a walk of endpoint from the cursor first ("" or "1" for
// the first page), bounded by max pages (MaxPages if max is not
// positive). path is the templated path, such as "/agent/chats/{id}/tasks",
// with no id in it: the *PagingError names it.
func (c *Client) NewPager(endpoint, path, first string, max int) *Pager {
	if max <= 0 {
		max = MaxPages
	}
	return &Pager{endpoint: endpoint, url: c.base + path, max: max, seen: map[string]bool{first: true}}
}

func (c *Client) newPager(endpoint, path, first string) *Pager {
	return c.NewPager(endpoint, path, first, 0)
}

// Advance records a page read and the cursor of the one asked next: a
// cursor asked before ends the walk with a *PagingError
// (ErrCursorRepeated), and so does the page past the bound
// (ErrTooManyPages).
func (p *Pager) Advance(next string) error {
	p.pages++
	switch {
	case p.seen[next]:
		return p.stop(ErrCursorRepeated)
	case p.pages >= p.max:
		return p.stop(ErrTooManyPages)
	}
	p.seen[next] = true
	return nil
}

// AdvancePage is Advance for a page-numbered listing, whose page numbers
// never repeat: a page of items that brought nothing new (fresh counts
// the items not read before) is the repeat.
func (p *Pager) AdvancePage(page, items, fresh int) error {
	if items > 0 && fresh == 0 {
		p.pages++
		return p.stop(ErrCursorRepeated)
	}
	return p.Advance(strconv.Itoa(page + 1))
}

func (p *Pager) stop(why error) error {
	return &PagingError{Endpoint: p.endpoint, URL: p.url, Pages: p.pages, Err: why}
}

// ContextWalk is where a walk through a room's context stands, so that a
// later walk resumes there: the cursor of the last page read ("" for the
// room's start) and the page size that fitted under the cap (0 for the
// largest, 100).
type ContextWalk struct {
	Cursor string
	Limit  int
}

// WalkContext reads chatID's context from w.Cursor to its end, oldest
// first, handing each page to each, and leaves w at the last page read,
// from which a later walk can resume. An error from each ends the walk
// with it, w unchanged.
//
// A page too large for the cap is asked again with half the items, down to
// one (and later walks start at the size that fitted); the pages grow back
// while they are well under the cap. A single item too large to read is
// handed over as its page's skeleton: Oversize set, its Items without
// content. One whose skeleton could not be read either ends the walk with
// the *TooLargeError. A repeated cursor, or more than MaxPages pages, ends
// it with a *PagingError.
func (c *Client) WalkContext(ctx context.Context, chatID string, w *ContextWalk, each func(*ContextPage) error) (err error) {
	defer c.scrub(&err)
	cursor, limit := w.Cursor, w.Limit
	if limit < 1 || limit > maxContextLimit {
		limit = maxContextLimit
	}
	p := c.newPager(EndpointContext, "/agent/chats/{id}/context", cursor)
	for {
		// Only a single item too large is worth reading on to learn its
		// size and ids; a larger page is asked again smaller at once.
		page, err := c.context(ctx, chatID, cursor, limit, limit == 1)
		var big *TooLargeError
		switch {
		case errors.As(err, &big) && limit > 1:
			limit /= 2
			continue
		case errors.As(err, &big) && big.Page != nil:
			page = big.Page
			page.Oversize = big
		case err != nil:
			return err
		}
		if err := each(page); err != nil {
			return err
		}
		if !page.HasMore {
			*w = ContextWalk{Cursor: cursor, Limit: limit}
			return nil
		}
		if err := p.Advance(page.NextCursor); err != nil {
			return err
		}
		cursor = page.NextCursor
		if page.Oversize == nil && page.bytes*2 <= c.bodyLimit() {
			limit = min(limit*2, maxContextLimit)
		}
	}
}
