package wire

// A mark's answer, {"data":{"id":…,"status":…,"attempt_number":…,
// "success":…}}, is decoded twice a message; encoding/json spends most of
// that on reflection. flatLexer reads the plain shape Band gives, with no
// reflection, and declines (ok false) whatever it does not know to read
// exactly as json.Unmarshal would (an escape, a non-ASCII byte, a null, a
// nested value, a key that differs from a field's only by case, a
// metadata member): the caller then decodes with encoding/json, so the
// two accept the same bodies and give the same values
// (FuzzFlatMarkAgreesWithJSON).

// flatLexer reads JSON from b, from offset i.
type flatLexer struct {
	b []byte
	i int
}

func (l *flatLexer) space() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// eat consumes c after white space.
func (l *flatLexer) eat(c byte) bool {
	l.space()
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes and
// returns its bytes, within b.
func (l *flatLexer) plainString() ([]byte, bool) {
	if !l.eat('"') {
		return nil, false
	}
	start := l.i
	for ; l.i < len(l.b); l.i++ {
		switch c := l.b[l.i]; {
		case c == '"':
			s := l.b[start:l.i]
			l.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// smallInt reads -?(0|[1-9][0-9]*) of at most 18 digits, which no int
// overflows.
func (l *flatLexer) smallInt() (int, bool) {
	l.space()
	neg := l.i < len(l.b) && l.b[l.i] == '-'
	if neg {
		l.i++
	}
	start, n := l.i, 0
	for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' {
		n = n*10 + int(l.b[l.i]-'0')
		l.i++
	}
	digits := l.i - start
	if digits == 0 || digits > 18 || (digits > 1 && l.b[start] == '0') || !l.endsValue() {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// boolean reads true or false.
func (l *flatLexer) boolean() (v, ok bool) {
	l.space()
	switch {
	case hasWord(l.b[l.i:], "true"):
		l.i += 4
		v = true
	case hasWord(l.b[l.i:], "false"):
		l.i += 5
	default:
		return false, false
	}
	return v, l.endsValue()
}

func hasWord(b []byte, w string) bool { return len(b) >= len(w) && string(b[:len(w)]) == w }

// endsValue reports whether a number or a literal ends here: what follows
// is white space, a comma, a closing brace or bracket, or the end.
func (l *flatLexer) endsValue() bool {
	if l.i == len(l.b) {
		return true
	}
	switch l.b[l.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// members reads an object's members, calling member with each key (its
// bytes within b) to read the value; member reports false to decline.
func (l *flatLexer) members(member func(key []byte) bool) bool {
	if !l.eat('{') {
		return false
	}
	if l.eat('}') {
		return true
	}
	for {
		key, ok := l.plainString()
		if !ok || !l.eat(':') || !member(key) {
			return false
		}
		if l.eat('}') {
			return true
		}
		if !l.eat(',') {
			return false
		}
	}
}

// end reports whether nothing but white space is left.
func (l *flatLexer) end() bool {
	l.space()
	return l.i == len(l.b)
}

// flatMark decodes a mark's answer, the envelope and its data, when it has
// the plain shape; the fields a body repeats take their last value, as
// with json.Unmarshal.
func flatMark(body []byte) (*Mark, bool) {
	l := flatLexer{b: body}
	var m *Mark
	ok := l.members(func(key []byte) bool {
		if string(key) != "data" {
			return false // metadata, or anything encoding/json should judge
		}
		if m == nil {
			m = new(Mark)
		}
		return l.members(func(key []byte) bool {
			var ok bool
			switch string(key) {
			case "id":
				var s []byte
				s, ok = l.plainString()
				m.ID = string(s)
			case "status":
				var s []byte
				s, ok = l.plainString()
				m.Status = string(s)
			case "attempt_number":
				m.AttemptNumber, ok = l.smallInt()
			case "success":
				m.Success, ok = l.boolean()
			}
			return ok
		})
	})
	if !ok || m == nil || !l.end() {
		return nil, false
	}
	return m, true
}
