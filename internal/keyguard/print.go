package keyguard

import (
	"fmt"
	"io"
	"strings"
)

// Redact returns Redacted in place of value, or "" when value is empty,
// so a reader can still tell whether one was set.
func Redact(value string) string {
	if value == "" {
		return ""
	}
	return Redacted
}

// Format is the Format method of a type that holds a secret: it writes v's
// GoString for %#v and its String for every other verb, so no verb or flag
// reaches fmt's printing of v's fields.
func Format(f fmt.State, verb rune, v interface {
	String() string
	GoString() string
}) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, v.GoString())
		return
	}
	_, _ = io.WriteString(f, v.String())
}

// SprintAs formats v by format, a copy of a config whose secret is
// already redacted, converted to a type of the same fields and no methods
// (so fmt prints it field by field rather than calling back into the
// config's own String), and names it typeName where %#v prints its type.
func SprintAs(format string, v any, typeName string) string {
	return strings.Replace(fmt.Sprintf(format, v), fmt.Sprintf("%T{", v), typeName+"{", 1)
}
