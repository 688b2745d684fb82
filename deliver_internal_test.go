package bandonce

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/wire"
)

// The reply's size is measured without building its body, and must be
// the size of the body the POST sends, escapes and all.
func TestAReplysMeasuredSizeIsTheSizeOfItsPOSTBody(t *testing.T) {
	for _, c := range []struct {
		content  string
		mentions []string
	}{
		{"hello", nil},
		{"<b>&amp;</b> \u2028 \u2029 \x00 \x1f \b \f \t \"quoted\" \\", []string{"u1", "@ada"}},
		{"bad \xff\xfe utf-8 and ünïcödé 🎉", []string{"@x"}},
		{"", []string{}},
	} {
		ms := mentions(c.mentions)
		size, err := postBodySize(c.content, ms)
		require.NoError(t, err)
		if ms == nil {
			ms = []wire.Mention{}
		}
		body, err := json.Marshal(map[string]any{"message": map[string]any{"content": c.content, "mentions": ms}})
		require.NoError(t, err)
		assert.Equal(t, len(body), size, c.content)
	}
}
