package bandonce_test

// What a Message costs and gives a handler: the room's context is read
// only when the handler asks for it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: band-once 0.1's defect 7 (band-once-python.md).
// Context was always fetched, twice, even for a handler that never looks at
// it. A first delivery with the default key costs four round trips: next,
// processing, post, processed.
func TestHandlerThatIgnoresContextCostsNoContextRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		for i := range 5 {
			w.say(w.rooms[0], fmt.Sprint("m", i))
		}
		cfg := w.config(echo)
		cfg.PollInterval = time.Hour // count only the drain's own requests
		stop := w.start(cfg)
		runFor(10 * time.Second)
		require.NoError(t, stop())
		req := w.band.Requests()
		assert.Zero(t, req[fakeband.EndpointContext])
		assert.Equal(t, 5, req[fakeband.EndpointPost])
		assert.Equal(t, 5, req[fakeband.EndpointProcessing])
		assert.Equal(t, 5, req[fakeband.EndpointProcessed])
		assert.Equal(t, 6, req[fakeband.EndpointNext], "five messages and the 204 that ends the drain")
	})
}

// Origin: band-once 0.1's defect 7 (band-once-python.md), its other half.
// RoomContext loads lazily: only a handler that asks pays for the read.
func TestRoomContextIsLoadedOnlyWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "first")
		w.say(w.rooms[0], "second")
		var seen []int
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			items, err := m.RoomContext(ctx)
			if err != nil {
				return nil, err
			}
			again, _ := m.RoomContext(ctx)
			if len(again) != len(items) {
				return nil, bandonce.Permanent(fmt.Errorf("context changed between calls"))
			}
			seen = append(seen, len(items))
			return echo(ctx, m)
		}
		stop := w.start(w.config(h))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, []int{2, 3}, seen, "both mentions, then also the first reply")
		assert.Equal(t, 2, w.band.Requests()[fakeband.EndpointContext], "one read per message, cached within it")
	})
}

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
