package bandonce_test

// Rows of the transition table (control-semantics.md §1.4) and dedup
// rules (§2) that no Python scenario names.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// §2: the correlation id is recorded before routing, so a signal that
// applies to no room still spends it.
func TestACorrelationIDIsSpentEvenWhenItsSignalAppliesNowhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "room", "ghost", "ctl-x")
		r.tap.signal("stop", "room", room.ID, "ctl-x")
		id := r.say(room, "not stopped")
		time.Sleep(time.Second) // less than a stop takes to settle: a probe cannot have lifted it
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Issue 3, item 4: the dedup set holds at least 256 ids, and is bounded:
// a replayed stop is dropped after 255 other signals, and applied again
// once a thousand more have pushed it out.
func TestTheDedupSetRemembersAtLeast256IDsAndIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		stop := r.run(nil)
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		r.tap.signal("play", "room", room.ID, "ctl-play")
		for i := range 254 {
			r.tap.signal("play", "room", "ghost", fmt.Sprint("ctl-ghost-", i))
		}
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		first := r.say(room, "remembered")
		time.Sleep(time.Second) // less than a stop takes to settle: a probe cannot have lifted it
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(first)), "256 ids back, the replay is still dropped")

		for i := range 1000 {
			r.tap.signal("play", "room", "ghost", fmt.Sprint("ctl-more-", i))
		}
		r.tap.signal("stop", "room", room.ID, "ctl-old")
		second := r.say(room, "forgotten")
		// Band's gate is open, so the room's first probe would lift this
		// stop once it settles; until then it holds.
		time.Sleep(time.Second)
		assert.Zero(t, r.h.callsOf(second), "evicted: the old id is applied again")
		require.NoError(t, stop())
	})
}

// §1.4, S3 play: a play while the handler runs in a room that is not
// stopped leaves that cycle alone.
func TestPlayDuringAHandlerLeavesItAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 10*time.Second)
		room := r.rooms[0]
		id := r.say(room, "working")
		stop := r.run(nil)
		require.NoError(t, r.band.PlayRoom(room.ID))
		time.Sleep(30 * time.Second)
		require.NoError(t, stop())
		assert.Empty(t, r.h.causes(id))
		assert.Equal(t, 1, r.h.callsOf(id))
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

// Core rule: the cause decides, not what the handler returns. A handler
// that fails because its context was cancelled by a signal has not
// failed: with a budget of one failure, a stopped message is still
// answered after play.
func TestAHandlerErrorCausedByASignalIsNotAFailure(t *testing.T) {
	for _, mode := range []string{"interrupt", "stop"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				out := &outcomes{}
				var cut atomic.Bool
				cut.Store(true)
				h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
					if cut.Load() {
						<-ctx.Done()
						return nil, fmt.Errorf("the model call failed: %w", context.Cause(ctx))
					}
					return echo(ctx, m)
				}
				id := w.say(room, "cut")
				cfg := w.socketConfig(h)
				cfg.MaxAttempts = 1
				cfg.Hooks.Outcome = out.add
				stop := startOnce(w, cfg)
				time.Sleep(time.Second)
				if mode == "interrupt" {
					require.NoError(t, w.band.Interrupt(w.agent.ID, room.ID))
				} else {
					require.NoError(t, w.band.StopRoom(room.ID))
				}
				time.Sleep(time.Second)
				cut.Store(false)
				require.NoError(t, w.band.PlayRoom(room.ID))
				time.Sleep(5 * time.Second)
				require.NoError(t, stop())

				assert.Zero(t, w.countMarks(id, "failed"))
				if mode == "interrupt" {
					assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, out.of(id))
					assert.Empty(t, w.replies(room))
				} else {
					assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, out.of(id))
					assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
				}
			})
		})
	}
}

// §1.4: two signals racing on one cycle. Whichever kind wins, the cycle
// dies, nothing is posted, the room ends stopped, and after play the
// message is settled once: either consumed, or answered once.
func TestTwoRacingSignalsKillTheCycleWhateverTheOrder(t *testing.T) {
	for _, order := range [][2]string{{"interrupt", "stop"}, {"stop", "interrupt"}} {
		for _, p := range []phase{{name: "handler", work: time.Hour}, {name: "claim", hold: fakeband.EndpointProcessing}} {
			t.Run(order[0]+"-then-"+order[1]+"/"+p.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := newRig(t, 1, p.work)
					room := r.rooms[0]
					id := r.say(room, "raced")
					if p.hold != "" {
						r.band.Inject(fakeband.Fault{Endpoint: p.hold, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
					}
					stop := r.run(nil)
					for _, sig := range order {
						r.tap.signal(sig, "room", room.ID, "")
					}
					time.Sleep(30 * time.Second)
					assert.Empty(t, r.replies(room))
					assert.Zero(t, r.tap.count("post", room.ID))

					r.h.setWork(0)
					r.tap.signal("play", "room", room.ID, "")
					time.Sleep(30 * time.Second)
					require.NoError(t, stop())
					kinds := r.out.of(id)
					t.Logf("outcomes: %v", kinds)
					require.NotEmpty(t, kinds)
					switch kinds[0] {
					case bandonce.Interrupted:
						assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, kinds, "consumed, never run again")
						assert.Empty(t, r.replies(room))
					case bandonce.Stopped:
						assert.Equal(t, []bandonce.OutcomeKind{bandonce.Stopped, bandonce.Replied}, kinds, "left, then answered once")
						assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)))
					default:
						t.Fatalf("outcomes %v", kinds)
					}
					assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
				})
			})
		}
	}
}
