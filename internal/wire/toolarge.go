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
// keeping it, to learn its size and the ids it carries. Past that the size
// is a lower bound and nothing of the body is used.
const overread = 4

// TooLargeError reports a 2xx answer whose body is larger than the
// Client's cap (SetMaxBodyBytes). The body is not kept: the client reads
// on past the cap, up to four times it, only to measure the body and to
// pick out the ids a caller needs to get past it.
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

// tooLarge reads the rest of a body past the cap (up to overread times
// it), measuring it and scanning it for the ids a caller needs, and
// returns the error that says so.
func tooLarge(endpoint string, resp *http.Response, head []byte, limit int) *TooLargeError {
	budget := int64(limit) * overread
	body := &countingReader{r: io.MultiReader(bytes.NewReader(head), io.LimitReader(resp.Body, budget-int64(len(head))))}
	skel, err := scanSkeleton(body)
	_, _ = io.Copy(io.Discard, body)
	e := &TooLargeError{Endpoint: endpoint, Cap: limit, Size: body.n}
	if body.n >= budget {
		e.AtLeast = true
		err = io.ErrUnexpectedEOF // the scan may have seen only part of it
	}
	if resp.ContentLength > e.Size {
		e.Size, e.AtLeast = resp.ContentLength, false
	}
	if err != nil {
		return e
	}
	if skel.one != nil && skel.one.ID != "" && skel.one.SenderID != "" {
		e.Message = skel.one
	}
	if skel.items != nil && skel.hasMore != nil {
		page := &ContextPage{Items: skel.items}
		for _, m := range skel.items {
			if m.ID == "" || m.SenderID == "" {
				return e
			}
		}
		if *skel.hasMore {
			if skel.nextCursor == "" {
				return e
			}
			page.HasMore, page.NextCursor = true, skel.nextCursor
		}
		e.Page = page
	}
	return e
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

// skipValue reads one value, however deep, and keeps none of it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
