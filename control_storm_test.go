package bandonce_test

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A thousand socket drops, each after the shell has reconnected, with
// messages said all through the storm: every message is answered exactly
// once, and the shell ends with no more goroutines than it began with
// (goleak checks the rest when the package's tests end).
func TestAThousandSocketDropsLoseNoMessageAndLeakNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 2)
		h := newTurns(0)
		out := &outcomes{}
		cfg := w.socketConfig(h.handle)
		cfg.Hooks.Outcome = out.add
		stop := startOnce(w, cfg)
		time.Sleep(time.Second)
		synctest.Wait()
		baseline := runtime.NumGoroutine()

		var said []string
		for drop := range 1000 {
			if drop%10 == 0 {
				said = append(said, w.say(w.rooms[drop/10%2], fmt.Sprint("storm ", drop)))
			}
			w.band.DropSockets(w.agent.ID)
			// Wait until the shell has dialled again and joined, so every
			// drop closes a live connection.
			for w.band.Requests()[fakeband.EndpointSocket] < drop+2 {
				time.Sleep(50 * time.Millisecond)
			}
			synctest.Wait()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// A leak per drop would show as a thousand more; a few may be in
		// flight at any moment.
		assert.Less(t, runtime.NumGoroutine(), baseline+10, "no goroutine piled up over the storm")
		require.NoError(t, stop())

		drops := 0
		for _, e := range w.band.Events() {
			if e.Kind == fakeband.EventDrop && e.Detail == "1" {
				drops++
			}
		}
		assert.Equal(t, 1000, drops, "every drop closed a live connection")
		require.Len(t, said, 100)
		for i, id := range said {
			room := w.rooms[i%2]
			assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "message %d", i)
			assert.Equal(t, []bandonce.OutcomeKind{bandonce.Replied}, out.of(id), "message %d", i)
		}
	})
}
