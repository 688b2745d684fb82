package pgledger

import (
	"strings"
	"testing"
)

// FuzzStorableTextRoundTrips: whatever a dead letter's text holds, its
// stored form has no NUL byte and reads back as it was.
func FuzzStorableTextRoundTrips(f *testing.F) {
	for _, s := range []string{"", "plain", "a\x00b", "\uFFFE", "\uFFFE0", "\uFFFE\uFFFE\x00", "x\uFFFE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stored := storable(s)
		if strings.ContainsRune(stored, 0) {
			t.Fatalf("storable(%q) = %q holds a NUL", s, stored)
		}
		if back := unstorable(stored); back != s {
			t.Fatalf("unstorable(storable(%q)) = %q", s, back)
		}
	})
}
