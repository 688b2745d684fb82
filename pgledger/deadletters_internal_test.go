package pgledger

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzStorableTextRoundTrips: whatever a dead letter's text holds, its
// stored form has no NUL byte, is UTF-8 (PostgreSQL refuses a text that
// is not), and reads back as it was, bytes that are not UTF-8 as U+FFFD.
func FuzzStorableTextRoundTrips(f *testing.F) {
	for _, s := range []string{"", "plain", "a\x00b", "\uFFFE", "\uFFFE0", "\uFFFE\uFFFE\x00", "x\uFFFE", "upstream said \xff\xfe", "\xff\x00\uFFFE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stored := storable(s)
		if strings.ContainsRune(stored, 0) {
			t.Fatalf("storable(%q) = %q holds a NUL", s, stored)
		}
		if !utf8.ValidString(stored) {
			t.Fatalf("storable(%q) = %q is not UTF-8", s, stored)
		}
		if back, want := unstorable(stored), strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Fatalf("unstorable(storable(%q)) = %q, want %q", s, back, want)
		}
	})
}
