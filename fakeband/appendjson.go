package fakeband

import (
	"strconv"
	"unicode/utf8"
)

// The answers a message costs most often (a message served by /next or
// pushed, a post's answer, a mark) are written here without reflection,
// byte for byte as encoding/json writes them (FuzzAppendJSONAgreesWithJSON
// holds the two together); anything else goes through encoding/json.

// appendData appends {"data":v} for the shapes above and reports
// whether v was one of them.
func appendData(b []byte, v any) ([]byte, bool) {
	b = append(b, `{"data":`...)
	var ok bool
	switch v := v.(type) {
	case chatMessageJSON:
		b, ok = appendMessage(b, &v)
	case postedJSON:
		b, ok = appendPosted(b, &v), true
	case markJSON:
		b, ok = appendMark(b, &v), true
	}
	return append(b, '}'), ok
}

// appendMessage appends a text message; an event, whose metadata is its
// own object, is left to encoding/json (false).
func appendMessage(b []byte, m *chatMessageJSON) ([]byte, bool) {
	meta, ok := m.Metadata.(metadataJSON)
	if !ok {
		return b, false
	}
	b = appendField(b, `{"id":`, m.ID)
	b = appendField(b, `,"content":`, m.Content)
	b = appendField(b, `,"message_type":`, m.MessageType)
	b = appendField(b, `,"sender_id":`, m.SenderID)
	b = appendField(b, `,"sender_type":`, m.SenderType)
	b = appendField(b, `,"sender_name":`, m.SenderName)
	b = appendField(b, `,"chat_room_id":`, m.ChatRoomID)
	b = appendField(b, `,"inserted_at":`, m.InsertedAt)
	b = appendField(b, `,"updated_at":`, m.UpdatedAt)
	b = append(b, `,"metadata":{"mentions":`...)
	b = appendList(b, meta.Mentions, func(b []byte, mn *mentionJSON) []byte {
		b = appendPerson(b, mn.ID, mn.Handle, mn.Name)
		if mn.Kind != "" {
			b = appendField(b, `,"kind":`, mn.Kind)
		}
		return append(b, '}')
	})
	return append(b, "}}"...), true
}

func appendPosted(b []byte, p *postedJSON) []byte {
	b = appendField(b, `{"id":`, p.ID)
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, p.Success)
	b = append(b, `,"recipients":`...)
	b = appendList(b, p.Recipients, func(b []byte, r *recipientJSON) []byte {
		return append(appendPerson(b, r.ID, r.Handle, r.Name), '}')
	})
	return append(b, '}')
}

// appendList appends items as a JSON array, each by item; nil is null,
// as encoding/json writes a nil slice.
func appendList[T any](b []byte, items []T, item func([]byte, *T) []byte) []byte {
	if items == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, &items[i])
	}
	return append(b, ']')
}

// appendPerson opens an object with a participant's id, handle and name;
// the caller closes it.
func appendPerson(b []byte, id, handle, name string) []byte {
	b = appendField(b, `{"id":`, id)
	b = appendField(b, `,"handle":`, handle)
	return appendField(b, `,"name":`, name)
}

func appendMark(b []byte, m *markJSON) []byte {
	b = appendField(b, `{"id":`, m.ID)
	b = appendField(b, `,"status":`, m.Status)
	b = append(b, `,"attempt_number":`...)
	b = strconv.AppendInt(b, int64(m.AttemptNumber), 10)
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, m.Success)
	return append(b, '}')
}

func appendField(b []byte, name, s string) []byte {
	return appendString(append(b, name...), s)
}

// appendString appends s quoted as encoding/json quotes it, HTML
// escaping included: invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
