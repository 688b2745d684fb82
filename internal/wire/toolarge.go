package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/band-once/bandonce/internal/keyguard"
)

// ErrTooLarge is matched by every *TooLargeError.
var ErrTooLarge = errors.New("band: answer too large")

// overread is how many times the cap a body past it is read on, without
// keeping it, to learn its size. Past that the size is a lower bound. A
// body whose ids a caller needs (request.skim) is read to its end instead.
const overread = 4

// clipAt is how much of any one token of a body past the cap the scan
// keeps: strings and numbers are cut there, so the scan's memory does
// not grow with the body.
const clipAt = 64 << 10

// wholeBelow bounds the ids and cursors the scan trusts: a string cut at
// clipAt raw bytes decodes to at least a sixth of that (a \uXXXX escape
// is six bytes of one character), so one shorter than this was not cut.
const wholeBelow = (clipAt - 1) / 6

// The scan's other bounds: how deep a value it skips may nest (the
// decoder keeps a frame per level) and how many messages it keeps. Past
// either it gives up, and the answer gives no ids.
const (
	maxSkimDepth = 10000
	maxSkimItems = maxContextLimit
)

// TooLargeError reports a 2xx answer whose body is larger than the
// Client's cap (SetMaxBodyBytes). The body is not kept. A /next answer,
// and a /context page of one item, is read on to its end, keeping no
// token past 64 KiB and giving up past maxSkimDepth or maxSkimItems, to
// measure it and to pick out the ids a caller needs to get past it (the
// request's timeout bounds how long); any other is read on up to four
// times the cap, only to measure it.
type TooLargeError struct {
	// Endpoint names the call, such as "GET /agent/chats/{id}/context".
	Endpoint string
	// Cap is the cap in bytes.
	Cap int
	// Size is the body's size in bytes; when AtLeast is set it is only a
	// lower bound (the body was longer than the client would read).
	Size    int64
	AtLeast bool
	// Message is the message a /next answer served, with its ids and
	// types but no content; nil when the body did not give them.
	Message *Message
	// Page is a /context page read the same way: each item without its
	// content, and the page's cursor; nil when the body did not give it.
	Page *ContextPage
}

// Error names the endpoint, the body's size and the cap.
func (e *TooLargeError) Error() string {
	size := fmt.Sprintf("%d", e.Size)
	if e.AtLeast {
		size = "more than " + size
	}
	return fmt.Sprintf("band: %s: answer of %s bytes exceeds the %d-byte cap on response bodies", e.Endpoint, size, e.Cap)
}

// Unwrap makes every TooLargeError match ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// scrub takes the key out of the ids the server filled.
func (e *TooLargeError) scrub(key *keyguard.Secret) {
	clean := func(m *Message) {
		m.ID, m.SenderID, m.SenderType, m.MessageType = key.Scrub(m.ID), key.Scrub(m.SenderID), key.Scrub(m.SenderType), key.Scrub(m.MessageType)
	}
	if e.Message != nil {
		clean(e.Message)
	}
	if e.Page != nil {
		for i := range e.Page.Items {
			clean(&e.Page.Items[i])
		}
	}
}

// tooLarge reads the rest of a body past the cap and returns the error
// that says so. With skim it reads to the end, scanning the body for the
// ids a caller needs; without, it only measures, up to overread times
// the cap.
func tooLarge(endpoint string, resp *http.Response, head []byte, limit int, skim bool) *TooLargeError {
	budget := int64(limit) * overread
	body := &countingReader{r: io.MultiReader(bytes.NewReader(head), resp.Body)}
	e := &TooLargeError{Endpoint: endpoint, Cap: limit}
	if !skim {
		body.r = io.LimitReader(body.r, budget)
		_, _ = io.Copy(io.Discard, body)
		e.Size, e.AtLeast = body.n, body.n >= budget
		if resp.ContentLength > e.Size {
			e.Size, e.AtLeast = resp.ContentLength, false
		}
		return e
	}
	skel, err := scanSkeleton(&clipReader{r: body, max: clipAt})
	// What follows the envelope (or a part the scan could not read) is
	// only measured.
	scanned := body.n
	body.r = io.LimitReader(body.r, budget)
	_, _ = io.Copy(io.Discard, body)
	e.Size, e.AtLeast = body.n, body.n-scanned >= budget
	if resp.ContentLength > e.Size {
		e.Size, e.AtLeast = resp.ContentLength, false
	}
	if err != nil {
		return e
	}
	usable := func(m Message) bool {
		return m.ID != "" && m.SenderID != "" && len(m.ID) < wholeBelow && len(m.SenderID) < wholeBelow
	}
	if skel.one != nil && usable(*skel.one) {
		e.Message = skel.one
	}
	if skel.items != nil && skel.hasMore != nil {
		page := &ContextPage{Items: skel.items}
		for _, m := range skel.items {
			if !usable(m) {
				return e
			}
		}
		if *skel.hasMore {
			if skel.nextCursor == "" || len(skel.nextCursor) >= wholeBelow {
				return e
			}
			page.HasMore, page.NextCursor = true, skel.nextCursor
		}
		e.Page = page
	}
	return e
}

// clipReader passes JSON through, cutting every string, number and run
// of white space to at most max bytes, so that a decoder reading it holds
// at most that much of any one token, however long the body. A string is
// cut only between two characters or escapes, a number only after a
// digit, so what passes is still JSON when what came in was.
type clipReader struct {
	r   io.Reader
	max int

	inString bool
	letter   bool // the next byte is an escape's letter
	escape   int  // bytes of an escape still to come
	run      int  // bytes of the current token passed
	class    byte // outside a string: 's' white space, 'n' a scalar, 0 neither
	dropping bool // the current token's tail is dropped
	last     byte // the last byte passed
}

func (c *clipReader) Read(p []byte) (int, error) {
	for {
		n, err := c.r.Read(p)
		kept := c.clip(p[:n])
		if kept > 0 || err != nil {
			return kept, err
		}
	}
}

// clip filters p in place and returns how many bytes it kept.
func (c *clipReader) clip(p []byte) int {
	out := 0
	keep := func(b byte) {
		p[out] = b
		out++
		c.run++
		c.last = b
	}
	for _, b := range p {
		if c.inString {
			switch {
			case c.escape > 0:
				if c.escape--; c.letter && b == 'u' {
					c.escape = 4
				}
				c.letter = false
				if !c.dropping {
					keep(b)
				}
			case b == '"':
				c.inString, c.dropping = false, false
				keep(b)
			default:
				if b == '\\' {
					c.escape, c.letter = 1, true
				}
				if !c.dropping && c.run >= c.max {
					c.dropping = true
				}
				if !c.dropping {
					keep(b)
				}
			}
			continue
		}
		class := byte(0)
		switch b {
		case '"':
			c.inString, c.run = true, 0
		case ' ', '\t', '\r', '\n':
			class = 's'
		case '{', '}', '[', ']', ',', ':':
		default:
			class = 'n'
		}
		if class != c.class || class == 0 {
			c.class, c.run, c.dropping = class, 0, false
		}
		if class != 0 && !c.dropping && c.run >= c.max && (class == 's' || c.last >= '0' && c.last <= '9') {
			c.dropping = true
		}
		if !c.dropping {
			keep(b)
		}
	}
	return out
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// skeleton is what scanSkeleton keeps of an envelope: the data's messages
// without their content, and a cursor page's metadata.
type skeleton struct {
	one        *Message  // data was an object
	items      []Message // data was an array
	hasMore    *bool
	nextCursor string
}

// scanSkeleton walks an envelope token by token, keeping only the ids and
// types of the messages in data and the cursor in metadata.
func scanSkeleton(r io.Reader) (skeleton, error) {
	var s skeleton
	dec := json.NewDecoder(r)
	dec.UseNumber() // a number past float64's range is still JSON
	if err := expectDelim(dec, '{'); err != nil {
		return s, err
	}
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return s, err
		}
		switch key {
		case "data":
			t, err := dec.Token()
			if err != nil {
				return s, err
			}
			switch t {
			case json.Delim('{'):
				m, err := scanMessage(dec)
				if err != nil {
					return s, err
				}
				s.one = &m
			case json.Delim('['):
				s.items = []Message{}
				for dec.More() {
					if len(s.items) == maxSkimItems {
						return s, fmt.Errorf("data holds more than %d messages", maxSkimItems)
					}
					if err := expectDelim(dec, '{'); err != nil {
						return s, err
					}
					m, err := scanMessage(dec)
					if err != nil {
						return s, err
					}
					s.items = append(s.items, m)
				}
				if err := expectDelim(dec, ']'); err != nil {
					return s, err
				}
			default:
				return s, errors.New("data is neither an object nor an array")
			}
		case "metadata":
			if err := scanCursorMeta(dec, &s); err != nil {
				return s, err
			}
		default:
			if err := skipValue(dec); err != nil {
				return s, err
			}
		}
	}
	return s, expectDelim(dec, '}')
}

// scanMessage reads a message object whose '{' was read, keeping its ids.
func scanMessage(dec *json.Decoder) (Message, error) {
	var m Message
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return m, err
		}
		var into *string
		switch key {
		case "id":
			into = &m.ID
		case "sender_id":
			into = &m.SenderID
		case "sender_type":
			into = &m.SenderType
		case "message_type":
			into = &m.MessageType
		}
		if into == nil {
			if err := skipValue(dec); err != nil {
				return m, err
			}
			continue
		}
		if *into, err = stringToken(dec); err != nil {
			return m, err
		}
	}
	return m, expectDelim(dec, '}')
}

func scanCursorMeta(dec *json.Decoder, s *skeleton) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('{') {
		return errors.New("metadata is not an object")
	}
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return err
		}
		switch key {
		case "has_more":
			t, err := dec.Token()
			if err != nil {
				return err
			}
			b, ok := t.(bool)
			if !ok {
				return errors.New("has_more is not a boolean")
			}
			s.hasMore = &b
		case "next_cursor":
			t, err := dec.Token()
			if err != nil {
				return err
			}
			s.nextCursor, _ = t.(string)
		default:
			if err := skipValue(dec); err != nil {
				return err
			}
		}
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("want %v, got %v", d, t)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %v", t)
	}
	return s, nil
}

// skipValue reads one value, up to maxSkimDepth deep, and keeps none of
// it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > maxSkimDepth {
				return fmt.Errorf("a value nests more than %d deep", maxSkimDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
