package keyguard_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/keyguard"
)

const key = "band_a_C4NARY/k3y+0f&th3=agent"

// holder is what a caller's struct holding a Secret looks like.
type holder struct {
	Name string
	key  *keyguard.Secret
	Key  *keyguard.Secret
}

func TestFormattingASecretNeverShowsIt(t *testing.T) {
	s := keyguard.New(key)
	h := holder{Name: "agent", key: s, Key: s}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{s, h, &h} {
			out := fmt.Sprintf(format, v)
			assert.NotContains(t, out, "C4NARY", "%s of %T", format, v)
		}
	}
	js, err := json.Marshal(h)
	require.NoError(t, err)
	assert.JSONEq(t, `{"Name":"agent","Key":"[redacted]"}`, string(js))
	assert.Equal(t, keyguard.Redacted, s.String())
	assert.Equal(t, key, s.Value(), "the one place it is sent still gets it")
	assert.Equal(t, "", keyguard.New("").String(), "an empty secret shows as empty, so a reader can tell")
	var nilSecret *keyguard.Secret
	assert.Equal(t, "", nilSecret.Value())
	assert.Equal(t, "text", nilSecret.Scrub("text"))
}

func TestScrubTakesOutEveryFormOfTheKey(t *testing.T) {
	s := keyguard.New(key)
	quoted := strconv.Quote(key)
	js, _ := json.Marshal(key)
	for name, form := range map[string]string{
		"raw":          key,
		"query":        url.QueryEscape(key),
		"path":         url.PathEscape(key),
		"go-quoted":    quoted[1 : len(quoted)-1],
		"json-escaped": string(js[1 : len(js)-1]),
	} {
		text := "before " + form + " between " + form + " after"
		require.True(t, s.In(text), name)
		got := s.Scrub(text)
		assert.Equal(t, "before [redacted] between [redacted] after", got, name)
		assert.False(t, s.In(got), name)
	}
	assert.Equal(t, "nothing here", s.Scrub("nothing here"))
}

func TestAShortValueIsNotScrubbedFromText(t *testing.T) {
	s := keyguard.New("k")
	assert.Equal(t, "a keyed kettle", s.Scrub("a keyed kettle"), "scrubbing every k would mangle every message")
	assert.Equal(t, keyguard.Redacted, fmt.Sprint(s), "yet it is never shown by formatting")
}

func TestScrubCutTakesAKeyCutShortAtTheEnd(t *testing.T) {
	s := keyguard.New(key)
	body := "<html>your key " + key + " is revoked</html>"
	for n := range len(body) + 1 {
		got := s.ScrubCut(body[:n])
		assert.NotContains(t, got, key[:min(len(key), 4)+3], "cut at %d: %q", n, got)
	}
	assert.Equal(t, "<html>your key [redacted]", s.ScrubCut("<html>your key "+key[:12]))
	assert.Equal(t, "ends in ban", s.ScrubCut("ends in ban"), "three bytes are no trace")
}

func TestErrorScrubsTheMessageAndKeepsTheChain(t *testing.T) {
	s := keyguard.New(key)
	inner := &fs.PathError{Op: "open", Path: "/keys/" + key, Err: fs.ErrNotExist}
	err := s.Error(fmt.Errorf("loading: %w", inner))
	assert.Equal(t, "loading: open /keys/[redacted]: file does not exist", err.Error())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Same(t, inner, pe)
	assert.NotContains(t, fmt.Sprintf("%+v", err), key)

	plain := errors.New("no key here")
	assert.Same(t, plain, s.Error(plain), "an error without the key is returned as it is")
	assert.NoError(t, s.Error(nil))
}

func TestReplacementDoesNotLeaveAPartOfALongerForm(t *testing.T) {
	// The query form of a key with a space is longer than the raw one and
	// contains no raw form: each must be replaced whole.
	s := keyguard.New("band_a_with space+plus")
	text := "raw band_a_with space+plus, query " + url.QueryEscape("band_a_with space+plus")
	got := s.Scrub(text)
	assert.Equal(t, "raw [redacted], query [redacted]", got)
	assert.False(t, strings.Contains(got, "space"))
}

func TestAKeyWithItsNewlineIsScrubbedWithoutItToo(t *testing.T) {
	s := keyguard.New(key + "\n")
	assert.Equal(t, "echoed [redacted].", s.Scrub("echoed "+key+"."))
	assert.Equal(t, "a keyed kettle", keyguard.New("   k    ").Scrub("a keyed kettle"), "no form shorter than MinScrubLength")
}
