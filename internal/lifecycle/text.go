package lifecycle

import (
	"strings"
	"unicode"
)

// Blank reports whether s holds nothing a person would see: only white
// space and invisible format characters (a byte-order mark, a zero-width
// space). Band takes no such message, so the shell sends none.
func Blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }) == ""
}
