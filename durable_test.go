package bandonce_test

import (
	"context"
	"fmt"
	"path/filepath"
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
					} else {
						assert.Zero(t, reads, "the ledger settled it without reading the room")
					}
				})
			})
		}
	}
}

// Natural keys shared across messages, and redeliveries after a crash
// between the post and the ack, are settled by the durable ledger within
// four round trips: no room read at all.
func TestDurableLedgerSettlesSharedKeysAndRedeliveriesWithoutReading(t *testing.T) {
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
		settle(time.Minute)
		require.NoError(t, stop())
		require.NoError(t, ledger.Close())
		w.band.ClearFaults()
		require.Equal(t, "processing", w.band.Status(w.agent.ID, ids[5]), "the last ack never landed")

		ledger, err = boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer ledger.Close()
		cfg.Ledger = ledger
		stop = w.start(cfg)
		settle(time.Minute)
		require.NoError(t, stop())

		for i, id := range ids {
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "message %d", i)
		}
		for k := range 3 {
			assert.Equal(t, 1, w.repliesTo(room, fmt.Sprint("order-", k)))
		}
		assert.Zero(t, w.band.Requests()[fakeband.EndpointContext], "no room read: the ledger knew")
	})
}

// keyedByBody replies with the message body as its natural key.
func keyedByBody(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}, DedupKey: m.Body()}, nil
}
