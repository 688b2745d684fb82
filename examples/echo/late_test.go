package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// Band applying a POST late: the fake holds the reply's POST and applies
// it after its sender died or gave up on it (fakeband's apply_late). The
// agent must post it once, never a second time after a read of the room
// that came too early to see the first.

// lateApplied reports whether n requests to ep held by apply_late have
// been applied.
func lateApplied(band *fakeband.Band, ep fakeband.Endpoint, n int) bool {
	return band.FaultsFired()[string(ep)+"/applied_late"] >= n
}

// A POST still held when its sender is SIGKILLed lands after the next
// life started: that life's guard reads the room only once the send has
// settled, finds the reply, and posts nothing.
func TestALatePOSTAfterARestartGivesOnePost(t *testing.T) {
	for _, ledger := range []string{"memory", "bolt"} {
		t.Run(ledger, func(t *testing.T) {
			bin, band, base := agentWorld(t, 11)
			agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
			room := band.AddRoom("ops", ada, agent.ID)
			env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_SETTLE_WINDOW=3s"}
			if ledger == "bolt" {
				env = append(env, "BANDONCE_LEDGER=bolt:"+filepath.Join(t.TempDir(), "echo.db"))
			}
			band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: 2 * time.Second})

			p := startAgent(t, bin, env...)
			id, err := band.Say(room.ID, ada.ID, "hello", agent.ID)
			require.NoError(t, err)
			eventually(t, "the reply's POST held", func() bool { return band.FaultsFired()["post/apply_late"] == 1 })
			p.kill(t)
			p = startAgent(t, bin, env...)

			eventually(t, "the held POST applied and the message processed", func() bool {
				return lateApplied(band, fakeband.EndpointPost, 1) && band.Status(agent.ID, id) == "processed"
			})
			assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "one post, though the first landed after the restart")
			p.kill(t)
		})
	}
}

// A POST the agent gave up on after its RequestTimeout lands later: the
// retry's read of the room waits until the send has settled, finds it,
// and posts nothing.
func TestALatePOSTPastTheRequestTimeoutGivesOnePost(t *testing.T) {
	bin, band, base := agentWorld(t, 12)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("ops", ada, agent.ID)
	// SettleWindow is left to its default, twice the request timeout.
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_REQUEST_TIMEOUT=1s"}
	band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: 1500 * time.Millisecond})

	p := startAgent(t, bin, env...)
	id, err := band.Say(room.ID, ada.ID, "hello", agent.ID)
	require.NoError(t, err)
	eventually(t, "the held POST applied and the message processed", func() bool {
		return lateApplied(band, fakeband.EndpointPost, 1) && band.Status(agent.ID, id) == "processed"
	})
	assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "one post, though the first landed after the agent gave up on it")
	assert.Contains(t, p.stderr.String(), "send outcome unknown", "the agent said it did not know")
	p.kill(t)
}

// The storm: echo with the bolt ledger in 4 rooms, messages streaming in,
// seeded SIGKILLs, and Band holding every reply POST and processed mark
// for 150 ms, so that a killed life's last POST lands after the next life
// started. No message is answered twice.
func TestALateApplyStormGivesNoDoubles(t *testing.T) {
	t.Parallel() // one of the three slowest: it runs beside the others
	const (
		rooms    = 4
		messages = 520 // 130 a room
		kills    = 24
		hold     = 150 * time.Millisecond
	)
	bin, band, base := agentWorld(t, 13)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	var roomIDs []string
	for i := range rooms {
		roomIDs = append(roomIDs, band.AddRoom(fmt.Sprint("room ", i), ada, agent.ID).ID)
	}
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base,
		"BANDONCE_LEDGER=bolt:" + filepath.Join(t.TempDir(), "echo.db"),
		// Longer than the hold, as the assumption wants; short, so that
		// every restart's wait costs the test little.
		"BANDONCE_SETTLE_WINDOW=1s"}
	for _, ep := range []fakeband.Endpoint{fakeband.EndpointPost, fakeband.EndpointProcessed} {
		band.Inject(fakeband.Fault{Endpoint: ep, Probability: 1, Kind: fakeband.ApplyLate, Delay: hold})
	}

	rng := rand.New(rand.NewPCG(13, 23))
	// Kill after a seeded number of messages said: a kill lands among
	// held POSTs and marks, wherever the agent happens to be.
	killAt := map[int]bool{}
	for len(killAt) < kills {
		killAt[10+rng.IntN(messages-20)] = true
	}
	p := startAgent(t, bin, env...)
	type said struct{ room, id string }
	var all []said
	for i := range messages {
		r := roomIDs[i%rooms]
		id, err := band.Say(r, ada.ID, fmt.Sprint("m", i), agent.ID)
		require.NoError(t, err)
		all = append(all, said{r, id})
		if killAt[i] {
			// Wait until a held reply POST is in flight, then kill.
			before := band.FaultsFired()["post/apply_late"]
			eventually(t, "a held POST", func() bool { return band.FaultsFired()["post/apply_late"] > before })
			p.kill(t)
			p = startAgent(t, bin, env...)
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // about 100 messages a second
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done := 0
		for _, m := range all {
			if band.Status(agent.ID, m.id) == "processed" {
				done++
			}
		}
		if done == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages processed after 3 minutes", done, len(all))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every held request is applied before it is counted done: wait for
	// all of them, so that a late double would be in the room.
	eventually(t, "every held request applied", func() bool {
		f := band.FaultsFired()
		return f["post/applied_late"] == f["post/apply_late"] && f["processed/applied_late"] == f["processed/apply_late"]
	})
	doubles := 0
	for _, m := range all {
		if n := repliesTo(band, m.room, agent.ID, m.id); n != 1 {
			doubles++
			t.Errorf("message %s in %s answered %d times", m.id, m.room, n)
		}
	}
	t.Logf("%d messages, %d kills, %d held POSTs: %d not answered exactly once",
		len(all), kills, band.FaultsFired()["post/apply_late"], doubles)
	p.kill(t)
}

// The latency a crash costs a message whose reply's POST was in flight:
// from the restart to its processed mark, with the settle window as
// given (the default is twice the 30 s request timeout), and for a
// message said in another room at the restart, which waits for nothing.
// Run: go test -run '^$' -bench BenchmarkReplyAfterACrash -benchtime 1x ./examples/echo
func BenchmarkReplyAfterACrash(b *testing.B) {
	for _, window := range []string{"", "5s"} {
		name := "window=default"
		if window != "" {
			name = "window=" + window
		}
		b.Run(name, func(b *testing.B) {
			bin, band, base := agentWorld(b, 14)
			agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
			crashed, other := band.AddRoom("crashed", ada, agent.ID), band.AddRoom("other", ada, agent.ID)
			env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base,
				"BANDONCE_LEDGER=bolt:" + filepath.Join(b.TempDir(), "echo.db")}
			if window != "" {
				env = append(env, "BANDONCE_SETTLE_WINDOW="+window)
			}
			var held, fresh time.Duration
			for i := range b.N {
				band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: time.Second})
				p := startAgent(b, bin, env...)
				id, err := band.Say(crashed.ID, ada.ID, fmt.Sprint("held ", i), agent.ID)
				require.NoError(b, err)
				eventually(b, "the reply's POST held", func() bool { return band.FaultsFired()["post/apply_late"] == i+1 })
				p.kill(b)
				band.ClearFaults()
				restart := time.Now()
				p = startAgent(b, bin, env...)
				id2, err := band.Say(other.ID, ada.ID, fmt.Sprint("fresh ", i), agent.ID)
				require.NoError(b, err)
				var freshAt time.Time
				deadline := restart.Add(5 * time.Minute)
				for band.Status(agent.ID, id) != "processed" {
					if freshAt.IsZero() && band.Status(agent.ID, id2) == "processed" {
						freshAt = time.Now()
					}
					if time.Now().After(deadline) {
						b.Fatal("the crashed message was not answered within 5 minutes")
					}
					time.Sleep(5 * time.Millisecond)
				}
				held += time.Since(restart)
				eventually(b, "the fresh message", func() bool { return band.Status(agent.ID, id2) == "processed" })
				if freshAt.IsZero() {
					freshAt = time.Now()
				}
				fresh += freshAt.Sub(restart)
				p.kill(b)
				require.Equal(b, 1, repliesTo(band, crashed.ID, agent.ID, id))
			}
			b.ReportMetric(held.Seconds()/float64(b.N), "s-to-crashed-reply")
			b.ReportMetric(fresh.Seconds()/float64(b.N), "s-to-fresh-reply")
			b.ReportMetric(0, "ns/op")
		})
	}
}
