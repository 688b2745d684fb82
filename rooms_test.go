package bandonce_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A room the agent joins is announced by a room_added push. When that
// push is lost, no wait for it is unbounded: the shell lists its rooms
// again after every reconnect, every fifth ResyncInterval with the socket
// up, and every ResyncInterval without one.
func TestARoomWhosePushWasLostIsFoundByListing(t *testing.T) {
	cases := []struct {
		name   string
		socket bool
		lose   func(r *rig)  // how the announcement goes missing
		found  func(r *rig)  // what brings the room to light
		within time.Duration // how long until it is served
		before time.Duration // and not before (0: no bound)
	}{
		{
			name:   "push lost on a live socket",
			socket: true,
			lose: func(r *rig) {
				r.band.InjectSocket(fakeband.SocketFault{Event: "room_added", Nth: 1, Kind: fakeband.LosePush})
			},
			found:  func(*rig) {},
			within: 5*time.Minute + time.Second,
			before: 4 * time.Minute,
		},
		{
			name:   "room added while the socket was down",
			socket: true,
			lose: func(r *rig) {
				r.band.DropSockets(r.agent.ID)
				synctest.Wait() // the shell noticed; it reconnects after a backoff
			},
			found:  func(*rig) {},
			within: 10 * time.Second,
		},
		{
			name:   "no socket at all",
			socket: false,
			lose:   func(*rig) {},
			found:  func(*rig) {},
			within: time.Minute + time.Second,
			before: 50 * time.Second,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, 0)
				stop := r.run(func(cfg *bandonce.Config) { cfg.DisableSocket = !c.socket })
				c.lose(r)
				fresh := r.band.AddRoom("joined later", r.human, r.agent.ID)
				id := r.say(fresh, "hello from the new room")
				if c.before > 0 {
					time.Sleep(c.before)
					require.Zero(t, r.h.callsOf(id), "not found before the listing is due")
				}
				c.found(r)
				time.Sleep(c.within - c.before)
				require.NoError(t, stop())
				assert.Equal(t, 1, r.repliesTo(fresh, bandonce.DefaultKey(id)), "the room was found and served")
				assert.True(t, r.logs.has(0, "found a room the agent had joined unannounced", fresh.ID))
			})
		})
	}
}

// A room the agent joins while the shell starts is served at once, not at
// the next periodic listing: joined before the agent_rooms topic is, it is
// in start's listing, which waits for the socket; joined after the listing
// because the socket came up late (past the 5 s start-up waits for it),
// the answered join lists the rooms again.
func TestARoomJoinedWhileTheShellStartsIsServed(t *testing.T) {
	for _, c := range []struct {
		name string
		late time.Duration // how long the agent_rooms join is held
	}{{"before the listing", 0}, {"after the listing, the socket late", 6 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, 0)
				var fresh fakeband.Room
				var id string
				r.tap.beforeJoin = func(topic string) {
					if topic == "agent_rooms:"+r.agent.ID && id == "" {
						time.Sleep(c.late)
						fresh = r.band.AddRoom("joined during start-up", r.human, r.agent.ID)
						id = r.say(fresh, "hello from the room joined during start-up")
					}
				}
				stop := r.run(nil)
				time.Sleep(10*time.Second + c.late)
				require.NoError(t, stop())
				require.NotEmpty(t, id)
				assert.Equal(t, 1, r.repliesTo(fresh, bandonce.DefaultKey(id)), "served within seconds")
			})
		})
	}
}

// The agent leaves a room and is added back while a round there still
// runs: the room is served again once that round ends, instead of being
// forgotten with it until the next periodic listing.
func TestARoomLeftAndJoinedAgainWhileBusyIsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 5*time.Second)
		room := r.rooms[0]
		first := r.say(room, "keeps the handler busy")
		stop := r.run(nil)
		require.Equal(t, 1, r.h.busy(), "the first message's handler runs")
		require.NoError(t, r.band.RemoveParticipant(room.ID, r.agent.ID))
		synctest.Wait()
		require.NoError(t, r.band.AddParticipant(room.ID, r.agent.ID))
		synctest.Wait()
		time.Sleep(10 * time.Second) // the busy round has ended
		second := r.say(room, "said after the agent was added back")
		time.Sleep(30 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(first)), "the busy turn ended once")
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(second)), "the room is served again")
		assert.False(t, r.logs.has(0, "found a room the agent had joined unannounced"), "served without waiting for a listing")
	})
}

// A message said while the room's topic is being joined is pushed to
// nobody. Once Band accepts the join the shell looks at /next, rather than
// leaving it to a resync that the idle budget may put off for long.
func TestAMessageSaidBeforeTheRoomIsJoinedIsAnsweredOnceItIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		var id string
		r.tap.beforeJoin = func(topic string) {
			if topic == "chat_room:"+room.ID && id == "" {
				time.Sleep(time.Second) // the room's first /next answered empty meanwhile
				id = r.say(room, "said before the room was joined")
			}
		}
		stop := r.run(nil)
		time.Sleep(2 * time.Second)
		require.NoError(t, stop())
		require.NotEmpty(t, id)
		assert.Equal(t, 1, r.repliesTo(room, bandonce.DefaultKey(id)), "answered once the join was accepted")
	})
}

// An idle agent asks Band little, however many rooms it is in: once each
// room has been looked at, it probes its rooms at two requests a second
// and lists them every fifth ResyncInterval (issue 17's idle figure, here
// on the virtual clock; the echo scale test logs it for the process on
// the wall clock).
func TestAnIdleAgentProbesAtTwoRequestsASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 200)
		stop := startOnce(w, w.socketConfig(echo))
		time.Sleep(time.Minute)
		synctest.Wait()
		require.GreaterOrEqual(t, w.band.Requests()[fakeband.EndpointNext], 200, "every room looked at once")
		before := w.band.Requests()
		const idle = 10 * time.Minute
		time.Sleep(idle)
		synctest.Wait()
		after := w.band.Requests()
		made := map[fakeband.Endpoint]int{}
		for e, n := range after {
			if d := n - before[e]; d > 0 {
				made[e] = d
			}
		}
		t.Logf("200 idle rooms, %s: %v", idle, made)
		// One probe may sit at each end of the window.
		assert.LessOrEqual(t, made[fakeband.EndpointNext], int(idle/(500*time.Millisecond))+2, "at most two probes a second")
		// A listing takes as many pages as the one at start-up.
		pages := before[fakeband.EndpointChats]
		assert.LessOrEqual(t, made[fakeband.EndpointChats], pages*(int(idle/(5*time.Minute))+1), "a listing every fifth ResyncInterval (a minute)")
		delete(made, fakeband.EndpointNext)
		delete(made, fakeband.EndpointChats)
		assert.Empty(t, made, "nothing else while idle")
		require.NoError(t, stop())
	})
}
