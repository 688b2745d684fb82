package bandonce_test

// What a supersede does: another shell took the agent over, so every room
// stops and Run returns ErrSuperseded.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Origin: the first end-to-end signal tests over the fake's socket.
func TestSupersedeStopsEveryRoomAndRunReturnsErrSuperseded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "slow")
		h := &slowHandler{d: time.Hour}
		s, err := bandonce.New(w.socketConfig(h.handle))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		time.Sleep(time.Second)
		w.band.Supersede(w.agent.ID)
		err = <-done
		assert.True(t, errors.Is(err, bandonce.ErrSuperseded), "%v", err)
		require.Len(t, h.seen(), 1)
		assert.ErrorIs(t, h.seen()[0], bandonce.ErrSuperseded)
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointSocket], "never reconnects")
	})
}
