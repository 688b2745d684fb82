package bandonce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// errorEvents returns the agent's error events in a room.
func (w *world) errorEvents(room fakeband.Room) []fakeband.ChatEvent {
	var out []fakeband.ChatEvent
	for _, e := range w.band.ChatEvents(room.ID) {
		if e.SenderID == w.agent.ID && e.MessageType == string(bandonce.EventError) {
			out = append(out, e)
		}
	}
	return out
}

func eventKey(t *testing.T, e fakeband.ChatEvent) string {
	t.Helper()
	var md map[string]any
	require.NoError(t, json.Unmarshal(e.Metadata, &md))
	key, _ := md["dedup_key"].(string)
	return key
}

// failing dead-letters every message after two failures; its error quotes
// the agent's key, as a careless error from a dependency might.
func (w *world) failing() bandonce.Config {
	cfg := w.config(func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
		return nil, fmt.Errorf("orders service refused key %s: connection refused", w.agent.Key)
	})
	cfg.MaxAttempts = 2
	return cfg
}

func TestADeadLetteredMessageTellsTheRoomOnceWithoutItsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "where is order 17?")
		stop := startOnce(w, w.failing())
		time.Sleep(time.Minute)
		require.NoError(t, stop())

		require.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		events := w.errorEvents(room)
		require.Len(t, events, 1, "one error event for the dead letter")
		assert.Equal(t, bandonce.NoticeKey(id), eventKey(t, events[0]))
		assert.Contains(t, events[0].Content, "could not answer this message")
		assert.Contains(t, events[0].Content, "tried 2 times")
		assert.NotContains(t, events[0].Content, w.agent.Key)
		assert.NotContains(t, events[0].Content, "connection refused", "the error's own text stays out of the room")
		assert.Empty(t, w.replies(room), "no reply")
	})
}

func TestTheDeadLetterNoticeIsPostedOnceThoughItsAnswerIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 1, Kind: fakeband.LoseResponse})
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 2, Count: 5, Kind: fakeband.FailBefore, Status: 503})
		stop := startOnce(w, w.failing())
		time.Sleep(10 * time.Minute)
		require.NoError(t, stop())

		assert.Len(t, w.errorEvents(room), 1, "the lost answer is not taken for a failure to post")
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
	})
}

func TestAMessageIsNotConsumedUntilTheRoomWasTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 1, Count: 40, Kind: fakeband.FailBefore, Status: 503})
		stop := startOnce(w, w.failing())
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Empty(t, w.errorEvents(room))
		assert.NotEqual(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id), "left failed while the notice is owed")
		time.Sleep(30 * time.Minute)
		require.NoError(t, stop())

		assert.Len(t, w.errorEvents(room), 1)
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
	})
}

func TestTheDeadLetterNoticeCanBeTurnedOffOrWorded(t *testing.T) {
	for name, tc := range map[string]struct {
		notice func(bandonce.DeadLetter) string
		want   []string
	}{
		"off": {func(bandonce.DeadLetter) string { return "" }, nil},
		"worded": {func(d bandonce.DeadLetter) string {
			return fmt.Sprintf("%s: no answer to %q after %d tries (%v)", d.SenderName, d.Body(), d.Failures, d.Err)
		}, []string{`ada: no answer to "hi" after 2 tries (orders service refused key [redacted]: connection refused)`}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "hi")
				cfg := w.failing()
				cfg.DeadLetterNotice = tc.notice
				stop := startOnce(w, cfg)
				time.Sleep(time.Minute)
				require.NoError(t, stop())

				var got []string
				for _, e := range w.errorEvents(room) {
					got = append(got, e.Content)
				}
				assert.Equal(t, tc.want, got)
				assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
			})
		})
	}
}

func TestAnAnsweredMessageTellsTheRoomNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		h := newAttemptLog(false)
		h.fails[id] = 2
		stop := startOnce(w, w.config(h.handle))
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
		assert.Empty(t, w.errorEvents(room), "failures that end in an answer are not news")
	})
}

func TestTheDefaultNoticeNamesTheKindOfFailure(t *testing.T) {
	for err, want := range map[error]string{
		&bandonce.PanicError{Value: "nil map"}:              "internal error",
		bandonce.RetryAfter(errors.New("429"), time.Second): "rate limit",
		fmt.Errorf("call: %w", context.DeadlineExceeded):    "took longer",
		bandonce.Permanent(errors.New("no such order")):     "cannot be done as it stands",
		errors.New("boom"): "kept failing",
		&bandonce.APIError{Endpoint: "POST /agent/chats/{id}/messages"}: "Band refused my answer",
	} {
		text := bandonce.DefaultDeadLetterNotice(bandonce.DeadLetter{Err: err, Failures: 3})
		assert.Contains(t, text, want, "%v", err)
		assert.Contains(t, text, "tried 3 times")
	}
}

func permanentFailure(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
	return nil, bandonce.Permanent(context.DeadlineExceeded)
}

// blipLedger fails the first n Key reads of the shell's own dead-letter
// records ("bandonce:..."), as a ledger does in a short outage (a
// connection reset, a statement timeout), then works again.
type blipLedger struct {
	*boltledger.Ledger
	mu     sync.Mutex
	n      int
	failed int
}

var errBlip = errors.New("ledger: connection reset by peer")

func (b *blipLedger) Key(ctx context.Context, room, key string) (bandonce.KeyState, error) {
	b.mu.Lock()
	if strings.HasPrefix(key, "bandonce:") || strings.HasSuffix(key, ":dead-letter") {
		if b.failed < b.n {
			b.failed++
			b.mu.Unlock()
			return bandonce.KeyUnknown, errBlip
		}
	}
	b.mu.Unlock()
	return b.Ledger.Key(ctx, room, key)
}

// The dead-letter notice's POST is held by Band and applied after the life
// that sent it died; the next life, on the same durable ledger, finishes
// the dead letter from the ledger's record of the notice: the room is told
// once, and the handler, which gave up for good, does not run again (a
// run would now answer after the room was told the agent stopped trying).
// The same when an earlier version wrote that record, under the notice's
// bare key, before events were named apart, and when the next life's
// reads of the record fail a while (it backs off, and does not take not
// knowing for "no record").
func TestADeadLetterNoticeAppliedAfterItsSenderDiedIsPostedOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		earlier bool
		// blips fail the next life's first reads of the shell's own
		// records: not knowing is no "no record".
		blips int
	}{
		{"this version's record", false, 0},
		{"an earlier version's record", true, 0},
		{"the record's reads failing a while", false, 6},
	} {
		earlier := c.earlier
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.ledger")
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "hi")
				w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 1, Kind: fakeband.ApplyLate, Delay: 3 * time.Second})
				var runs atomic.Int32
				var ledger *boltledger.Ledger
				life := func() bandonce.Config {
					var err error
					ledger, err = boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
					require.NoError(t, err)
					t.Cleanup(func() { ledger.Close() })
					c := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
						if runs.Add(1) == 1 {
							return permanentFailure(ctx, m)
						}
						return echo(ctx, m)
					})
					c.Ledger = ledger
					return c
				}
				first := life()
				killLifeAt(t, w, first, time.Second)
				if earlier {
					ctx, l := context.Background(), first.Ledger
					name := "bandonce:event:" + bandonce.NoticeKey(id)
					state, err := l.Key(ctx, room.ID, name)
					require.NoError(t, err)
					require.NotEqual(t, bandonce.KeyUnknown, state, "the first life began the notice")
					require.NoError(t, l.SetKey(ctx, room.ID, bandonce.NoticeKey(id), state))
					require.NoError(t, l.SetKey(ctx, room.ID, name, bandonce.KeyUnknown))
				}
				require.NoError(t, ledger.Close())
				second := life()
				if c.blips > 0 {
					// Six reads: the dead-letter look of this delivery and of
					// the next, once the settle window has passed.
					second.Ledger = &blipLedger{Ledger: ledger, n: c.blips}
				}
				stop := w.start(second)
				runFor(time.Minute)
				require.NoError(t, stop())
				dead, err := ledger.DeadLetters(context.Background())
				require.NoError(t, err)
				assert.Len(t, dead, 1, "kept once, for a replay")
				assert.Equal(t, int32(1), runs.Load(), "the handler gave up once, and runs once")
				assert.Len(t, w.errorEvents(room), 1, "the room is told once")
				assert.Equal(t, 0, w.repliesTo(room, bandonce.DefaultKey(id)))
				assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
			})
		})
	}
}

// The same in one life: the notice's POST times out and lands later. The
// message, failed, is served again once the POST has settled, and that
// delivery only finishes the dead letter: the handler, which gave up for
// good, does not run again (it once did, and an interrupt that reached
// the rerun found the message marked failed).
func TestADeadLetterNoticeAppliedLateIsPostedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 1, Kind: fakeband.ApplyLate, Delay: 4 * time.Second})
		var runs atomic.Int32
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			runs.Add(1)
			return permanentFailure(ctx, m)
		})
		cfg.RequestTimeout = 2 * time.Second
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		assert.Len(t, w.errorEvents(room), 1, "the room is told once")
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		assert.Equal(t, int32(1), runs.Load(), "the handler gave up once, and runs once")
	})
}
