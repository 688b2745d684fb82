package bandonce_test

// What a Message costs and gives a handler: the room's context is read
// only when the handler asks for it.

import (
	"context"
	"fmt"
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
