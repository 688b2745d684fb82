package keyguard_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce/internal/keyguard"
)

// config is a config as the callers write one: every printing method
// goes through the keyguard helpers.
type config struct {
	APIKey string
	Rooms  []string
}

func (c config) String() string                { return c.redacted("%+v") }
func (c config) GoString() string              { return c.redacted("%#v") }
func (c config) Format(f fmt.State, verb rune) { keyguard.Format(f, verb, c) }
func (c config) LogValue() slog.Value          { return slog.StringValue(c.String()) }

// printable has config's fields and none of its methods.
type printable config

func (c config) redacted(format string) string {
	c.APIKey = keyguard.Redact(c.APIKey)
	return keyguard.SprintAs(format, printable(c), "keyguard_test.config")
}

func TestAConfigPrintedAnyWayShowsItsKeyRedacted(t *testing.T) {
	c := config{APIKey: key, Rooms: []string{"r1"}}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("start", "cfg", c)
	for _, out := range []string{
		fmt.Sprint(c), fmt.Sprintf("%v|%+v|%s|%q|%x|%10.3v", c, c, c, c, c, c), c.String(), logged.String(),
	} {
		assert.NotContains(t, out, key)
		assert.NotContains(t, out, "band_a")
	}
	assert.Equal(t, "{APIKey:[redacted] Rooms:[r1]}", fmt.Sprint(c), "every verb but %#v prints String")
	assert.Equal(t, `keyguard_test.config{APIKey:"[redacted]", Rooms:[]string{"r1"}}`, fmt.Sprintf("%#v", c),
		"%#v prints GoString, the type named as the caller's")
	assert.Equal(t, "{APIKey: Rooms:[]}", fmt.Sprint(config{}), "an unset key stays visibly unset")
}

func TestRedact(t *testing.T) {
	assert.Equal(t, keyguard.Redacted, keyguard.Redact(key))
	assert.Empty(t, keyguard.Redact(""))
}
