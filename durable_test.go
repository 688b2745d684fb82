package bandonce_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// lifeWithLedger runs one life of a shell on the durable ledger at path,
// killed at request at (or never, for at < 0), and closes the ledger as
// the dead process's file handle would be.
func lifeWithLedger(t *testing.T, w *world, path string, at int, after bool) int {
	t.Helper()
	ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
	require.NoError(t, err)
	defer ledger.Close()
	cfg := w.config(echo)
	cfg.Ledger = ledger
	return runConfigWithKill(t, w, cfg, at, after)
}

// lifeWithDyingLedger runs one life of a shell on the durable ledger at
// path whose at-th write kills the shell (before the write is durable, or
// after), with the handler handler makes for that ledger, and checks that
// the crash happened.
func lifeWithDyingLedger(t *testing.T, w *world, path string, at int, after bool, handler func(*dyingLedger) bandonce.Handler) {
	t.Helper()
	ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
	require.NoError(t, err)
	ks := &killSwitch{next: w.band.HTTPClient().Transport, at: -1}
	dying := &dyingLedger{Ledger: ledger, at: at, after: after, kill: ks.killNow}
	cfg := w.config(handler(dying))
	cfg.Ledger = dying
	lifeUntilItsLedgerKillsIt(t, cfg, ks)
	require.NoError(t, ledger.Close())
	require.True(t, dying.dead, "the crash happened")
}

// lifeUntilItsLedgerKillsIt runs a shell of cfg for 20 s through ks, whose
// killNow cfg's ledger calls to crash the process: its requests stop and
// its Run is cancelled.
func lifeUntilItsLedgerKillsIt(t *testing.T, cfg bandonce.Config, ks *killSwitch) {
	t.Helper()
	cfg.HTTPClient = &http.Client{Transport: ks}
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	ctx, cancel := contextWithCancel()
	ks.kill = cancel
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(20 * time.Second)
	cancel()
	<-done
}

// With the durable ledger, a crash at every request boundary still gives
// exactly one reply per message, and the room is read only where the ledger
// held an intent without an outcome: a crash around the post itself.
func TestCrashAtEveryRequestBoundaryWithTheDurableLedger(t *testing.T) {
	var total int
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "a")
		total = lifeWithLedger(t, w, filepath.Join(t.TempDir(), "dry.ledger"), -1, false)
	})
	// me, chats, next, processing, post, processed (x1 message), next
	require.GreaterOrEqual(t, total, 7)
	const postRequest = 5
	for at := 1; at <= total; at++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("request %d, after=%v", at, after), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "agent.ledger")
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t, 1)
					id := w.say(w.rooms[0], "a")
					lifeWithLedger(t, w, path, at, after)
					lifeWithLedger(t, w, path, -1, false)
					assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
					assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
					reads := w.band.Requests()[fakeband.EndpointContext]
					if at == postRequest {
						assert.Equal(t, 1, reads, "an intent without an outcome needs the room read")
					} else if at == postRequest-1 && after {
						// Claimed, then killed before any ledger write: the
						// redelivery's "no record" could be a restored older
						// copy's, so the ledger is checked against the room.
						assert.Equal(t, 1, reads, "a redelivery with no record checks the ledger against the room, once")
					} else {
						assert.Zero(t, reads, "the ledger decided it without reading the room")
					}
				})
			})
		}
	}
}

// Natural keys shared across messages, and redeliveries after a crash
// between the post and the ack, are decided by the durable ledger within
// four round trips: the room is read once, in the first life, to check the
// ledger against it before its first "no record" is trusted.
func TestDurableLedgerDecidesSharedKeysAndRedeliveriesWithoutReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ledger")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		var ids []string
		for i := range 6 {
			ids = append(ids, w.say(room, fmt.Sprint("order-", i%3))) // three keys, each twice
		}
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		cfg := w.config(keyedByBody)
		cfg.Ledger = ledger
		cfg.PollInterval = time.Hour
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 6, Count: 1 << 30, Kind: fakeband.FailBefore, Status: 503})
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		require.NoError(t, ledger.Close())
		w.band.ClearFaults()
		require.Equal(t, "processing", w.band.Status(w.agent.ID, ids[5]), "the last ack never landed")

		ledger, err = boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer ledger.Close()
		cfg.Ledger = ledger
		stop = w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		for i, id := range ids {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "message %d", i)
		}
		for k := range 3 {
			assert.Equal(t, 1, w.repliesTo(room, fmt.Sprint("order-", k)))
		}
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointContext], "one room read, the ledger's check; then the ledger knew")
	})
}

// keyedByBody replies with the message body as its natural key.
func keyedByBody(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: m.Body()}, nil
}

// dyingLedger crashes the process at its n-th write: before the write
// reaches the ledger, or after it is durable.
type dyingLedger struct {
	bandonce.Ledger
	at    int
	after bool
	kill  func()

	mu   sync.Mutex
	n    int
	dead bool
}

func (d *dyingLedger) write(do func() error) error {
	d.mu.Lock()
	if d.dead {
		d.mu.Unlock()
		return errKilled
	}
	d.n++
	hit := d.n == d.at
	if hit && !d.after {
		d.dead = true
		d.mu.Unlock()
		d.kill()
		return errKilled
	}
	d.mu.Unlock()
	err := do()
	if hit {
		d.mu.Lock()
		d.dead = true
		d.mu.Unlock()
		d.kill()
		return errKilled
	}
	return err
}

func (d *dyingLedger) SetKey(ctx context.Context, room, key string, s bandonce.KeyState) error {
	return d.write(func() error { return d.Ledger.SetKey(ctx, room, key, s) })
}

func (d *dyingLedger) SetAckPending(ctx context.Context, room, id string, pending bool) error {
	return d.write(func() error { return d.Ledger.SetAckPending(ctx, room, id, pending) })
}

// A crash at every step boundary of the ledger's own writes (intent,
// accepted, ack pending, done), before and after each write is durable:
// exactly one reply, processed, and the room read only when the ledger
// held an intent without an outcome.
func TestCrashAtEveryLedgerWrite(t *testing.T) {
	const writes = 4 // intent, accepted, ack-pending, done
	for at := 1; at <= writes; at++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("write %d, after=%v", at, after), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "agent.ledger")
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t, 1)
					id := w.say(w.rooms[0], "a")

					lifeWithDyingLedger(t, w, path, at, after, func(*dyingLedger) bandonce.Handler { return echo })

					lifeWithLedger(t, w, path, -1, false)
					assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)))
					assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
					intentOnly := (at == 1 && after) || (at == 2 && !after)
					noRecord := at == 1 && !after
					reads := w.band.Requests()[fakeband.EndpointContext]
					switch {
					case intentOnly:
						assert.Equal(t, 1, reads, "an intent without an outcome needs the room read")
					case noRecord:
						assert.Equal(t, 1, reads, "a redelivery with no record checks the ledger against the room, once")
					default:
						assert.Zero(t, reads, "the ledger decided it without reading the room")
					}
				})
			})
		}
	}
}

// copyFile copies the file at from over to, as a restore from a backup
// does.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o600))
}

// A bolt ledger restored from an older copy (a backup, a volume snapshot)
// has lost the record of a reply it posted. Its "no record" is not taken
// for "never tried": the shell checks the ledger against the room once,
// finds the reply there, and posts nothing twice, neither for the message
// redelivered nor for another message sharing a natural key.
func TestARestoredOlderLedgerDoesNotDoubleAReply(t *testing.T) {
	for _, tt := range []struct {
		name    string
		handler bandonce.Handler
		second  bool // a second message with the same key comes in the second life
	}{
		{"the message redelivered, default key", echo, false},
		{"another message, the same natural key", keyedByBody, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, backup := filepath.Join(dir, "agent.ledger"), filepath.Join(dir, "backup.ledger")
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
				require.NoError(t, err)
				require.NoError(t, ledger.Close())
				copyFile(t, path, backup) // the backup, before any reply

				first := w.say(room, "order-1")
				cfg := w.config(tt.handler)
				cfg.PollInterval = time.Hour
				if !tt.second {
					// The processed mark never lands: Band serves the
					// message again in the next life.
					w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessed, Nth: 1, Count: 1 << 30, Kind: fakeband.FailBefore, Status: 503})
				}
				ledger, err = boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
				require.NoError(t, err)
				cfg.Ledger = ledger
				stop := w.start(cfg)
				runFor(time.Minute)
				require.NoError(t, stop())
				require.NoError(t, ledger.Close())
				w.band.ClearFaults()
				key := bandonce.DefaultKey(first)
				if tt.second {
					key = "order-1"
				}
				require.Equal(t, 1, w.repliesTo(room, key), "the first life replied")

				copyFile(t, backup, path) // restored: the reply's record is gone
				var second string
				if tt.second {
					second = w.say(room, "order-1")
				}
				ledger, err = boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
				require.NoError(t, err)
				defer ledger.Close()
				cfg.Ledger = ledger
				stop = w.start(cfg)
				runFor(time.Minute)
				require.NoError(t, stop())

				assert.Equal(t, 1, w.repliesTo(room, key), "not doubled")
				assert.Equal(t, "processed", w.band.Status(w.agent.ID, first))
				if tt.second {
					assert.Equal(t, "processed", w.band.Status(w.agent.ID, second))
				}
				state, err := ledger.Key(t.Context(), room.ID, key)
				require.NoError(t, err)
				assert.True(t, state.InRoom(), "the ledger was brought up to the room: %v", state)
			})
		})
	}
}

// An interrupt lands in the claim window and the claim then fails: the
// message's fate is decided (consumed, without the handler) and the next
// delivery only marks it (consumeOnServe). An interrupted message whose
// processed mark fails is recorded ack-pending on a durable ledger before
// the mark, so a restart only marks it; but consumeOnServe lives in memory
// alone. A restart before the consuming mark lands loses the interrupt on
// a durable ledger: the next life runs the handler and posts its reply.
func TestAnInterruptInAFailedClaimSurvivesARestartOnADurableLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		path := filepath.Join(t.TempDir(), "agent.ledger")
		life := func(during func()) {
			l, err := boltledger.Open(path, boltledger.Options{AgentID: r.agent.ID})
			require.NoError(t, err)
			stop := r.run(func(c *bandonce.Config) { c.MarkTimeout = 5 * time.Second; c.Ledger = l })
			during()
			require.NoError(t, stop())
			require.NoError(t, l.Close())
		}
		id := r.say(room, "w1")
		// The first claim hangs past MarkTimeout; every later one fails.
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 1, Kind: fakeband.Delay, Delay: time.Hour})
		r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 2, Count: 1000, Kind: fakeband.FailBefore, Status: 503})
		life(func() {
			require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
			time.Sleep(time.Minute)
		})
		require.Zero(t, r.h.callsOf(id), "the interrupt held in this life")
		r.band.ClearFaults()
		life(func() { time.Sleep(time.Minute) })

		assert.Zero(t, r.h.callsOf(id), "the interrupt is not lost with the restart")
		assert.Empty(t, r.replies(room), "nothing posted after the interrupt")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
	})
}
