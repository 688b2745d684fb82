package bandonce_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce"
)

// stripOracle is what StripMentions promises, as a regular expression.
func stripOracle(content string) string {
	marker := regexp.MustCompile(`@\[\[[0-9A-Fa-f-]{36}\]\]\s*`)
	return strings.TrimSpace(marker.ReplaceAllString(content, ""))
}

const uuid1 = "0b5a6c1e-7f2d-4e0a-9c3b-1d2e3f4a5b6c"

func TestStripMentionsRemovesMarkersAndTheSpaceAfterThem(t *testing.T) {
	for content, want := range map[string]string{
		"@[[" + uuid1 + "]] hello":                         "hello",
		"hi @[[" + uuid1 + "]]\t\n there":                  "hi there",
		"@[[" + uuid1 + "]]@[[" + uuid1 + "]]x":            "x",
		"@[[" + uuid1[:35] + "]] short":                    "@[[" + uuid1[:35] + "]] short",
		"@[[" + strings.ToUpper(uuid1) + "]] upper":        "upper",
		"@[[@[[" + uuid1 + "]] nested":                     "@[[nested",
		"@[[" + strings.Replace(uuid1, "0", "g", 1) + "]]": "@[[" + strings.Replace(uuid1, "0", "g", 1) + "]]",
		"  plain  ": "plain",
		"":          "",
	} {
		assert.Equal(t, want, bandonce.StripMentions(content), content)
		assert.Equal(t, stripOracle(content), bandonce.StripMentions(content), content)
	}
}

func TestStripMentionsAgreesWithItsRegularExpression(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	pieces := []string{"@[[", "]]", uuid1, uuid1[:10], "-", "a", "G", " ", "\t", "\n", "\v", "\f", "\r", "@", "[", "]", "é", "x y"}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		content := b.String()
		assert.Equal(t, stripOracle(content), bandonce.StripMentions(content), "%q", content)
	}
}
