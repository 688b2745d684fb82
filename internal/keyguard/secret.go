// Package keyguard keeps an agent's API key where it belongs: in the
// X-API-Key header of requests to Band, and nowhere else. A Secret holds
// the key so that formatting it, or a struct holding it, shows
// "[redacted]"; Scrub and Error take it out of text and errors that quote
// what a server or a transport said; Logger takes it out of every log
// record; SameOriginRedirects keeps net/http from carrying the header to
// another host; InClear says when a URL would send it over the network
// unencrypted.
package keyguard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Redacted stands in for a secret wherever one would be shown.
const Redacted = "[redacted]"

// MinScrubLength is the shortest secret Scrub takes out of text. A shorter
// value is no real key (Band's are some thirty characters), and taking
// every "k" out of every message would mangle them all. Such a value is
// still never shown by formatting the Secret itself.
const MinScrubLength = 8

// minFragment is the shortest tail of a cut text that ScrubCut treats as
// the beginning of the secret.
const minFragment = 4

// Secret holds a credential so that no formatting shows it: its own
// String, GoString, Format, LogValue and MarshalText all show Redacted,
// and its fields are a function, which fmt prints as an address even
// where it digs into a struct without calling its methods (an unexported
// field, a %s of a struct, which fmt prints field by field). The zero
// value and nil hold nothing.
type Secret struct {
	held func() *held
}

type held struct {
	value string
	// forms are the spellings of value text may hold (raw, trimmed,
	// URL-escaped, quoted), longest first; empty below MinScrubLength.
	forms    []string
	replacer *strings.Replacer
}

// New returns a Secret holding value.
func New(value string) *Secret {
	h := &held{value: value}
	s := &Secret{held: func() *held { return h }}
	if len(value) < MinScrubLength {
		return s
	}
	quoted := strconv.Quote(value)
	js, _ := json.Marshal(value) // a string always marshals
	seen := map[string]bool{}
	for _, f := range []string{
		value,
		strings.TrimSpace(value), // a key read from a file with its newline
		url.QueryEscape(value),
		url.PathEscape(value),
		quoted[1 : len(quoted)-1],
		string(js[1 : len(js)-1]),
	} {
		if !seen[f] && len(f) >= MinScrubLength {
			seen[f] = true
			h.forms = append(h.forms, f)
		}
	}
	// Longest first: where two forms match at one place, the longer wins.
	slices.SortStableFunc(h.forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(h.forms))
	for _, f := range h.forms {
		pairs = append(pairs, f, Redacted)
	}
	h.replacer = strings.NewReplacer(pairs...)
	return s
}

// get returns what s holds; nil and the zero Secret hold nothing.
func (s *Secret) get() *held {
	if s == nil || s.held == nil {
		return &held{}
	}
	return s.held()
}

// Value returns the secret itself, for the one place it is sent.
func (s *Secret) Value() string { return s.get().value }

// scrubs reports whether s is long enough to be taken out of text.
func (s *Secret) scrubs() bool { return len(s.get().forms) > 0 }

// String returns Redacted, or "" when the secret is empty, so a reader can
// still tell whether one was set.
func (s *Secret) String() string { return Redact(s.Value()) }

// GoString is String, quoted.
func (s *Secret) GoString() string { return strconv.Quote(s.String()) }

// Format writes String whatever the verb, GoString for %#v.
func (s *Secret) Format(f fmt.State, verb rune) { Format(f, verb, s) }

// LogValue is String.
func (s *Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText is String, so encoding/json shows Redacted too.
func (s *Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// In reports whether text holds the secret in any of its forms.
func (s *Secret) In(text string) bool {
	for _, f := range s.get().forms {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// Scrub returns text with every form of the secret replaced by Redacted.
func (s *Secret) Scrub(text string) string {
	if !s.In(text) {
		return text
	}
	return s.get().replacer.Replace(text)
}

// ScrubCut is Scrub for an excerpt, a text cut short at an arbitrary
// byte: a tail that is the start of the secret, left by the cut, is
// replaced too.
func (s *Secret) ScrubCut(text string) string {
	text = s.Scrub(text)
	for _, f := range s.get().forms {
		for n := min(len(f)-1, len(text)); n >= minFragment; n-- {
			if strings.HasSuffix(text, f[:n]) {
				return text[:len(text)-n] + Redacted
			}
		}
	}
	return text
}

// ScrubBytes is Scrub for bytes; b is returned as it is when it holds no
// form of the secret.
func (s *Secret) ScrubBytes(b []byte) []byte {
	if !s.In(string(b)) {
		return b
	}
	return []byte(s.get().replacer.Replace(string(b)))
}

// Error returns err as it is when its message holds no form of the
// secret, else an error whose message is scrubbed and which unwraps to
// err, so errors.Is and errors.As still see everything err wraps.
func (s *Secret) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !s.In(msg) {
		return err
	}
	return &scrubbedError{msg: s.Scrub(msg), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
