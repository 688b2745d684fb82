package bandonce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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

// charges is a payment API double: it performs one charge per
// idempotency key, however often it is called with that key, and counts
// the calls.
type charges struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *charges) charge(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[key]++
	return []byte("ch_" + key[len(key)-6:]), nil
}

func (c *charges) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// aliveCharges is the payment API as one life of the process reaches it:
// a dead process charges nothing.
type aliveCharges struct {
	*charges
	dead func() bool
}

func (a aliveCharges) charge(ctx context.Context, key string) ([]byte, error) {
	if a.dead() {
		return nil, errKilled
	}
	return a.charges.charge(ctx, key)
}

// turnHandler posts an event, sends two messages, takes a journaled step
// between them, and returns the final reply.
func turnHandler(pay interface {
	charge(context.Context, string) ([]byte, error)
}) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "a refund it is"}); err != nil {
			return nil, err
		}
		if err := m.Send(ctx, bandonce.Reply{Content: "looking into it", Mentions: []string{m.SenderID}}); err != nil {
			return nil, err
		}
		receipt, err := m.Step(ctx, "charge", pay.charge)
		if err != nil {
			return nil, err
		}
		if err := m.Send(ctx, bandonce.Reply{Content: "charged " + string(receipt), Mentions: []string{m.SenderID}}); err != nil {
			return nil, err
		}
		return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}}, nil
	}
}

// turnKeys are the keys one message's turn posts: two sends, the reply.
func turnKeys(id string) []string {
	return []string{bandonce.DefaultKey(id) + ":send:1", bandonce.DefaultKey(id) + ":send:2", bandonce.DefaultKey(id)}
}

func TestATurnSendsEachMessageOnceAndTheReplyLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "refund order 17")
		pay := &charges{}
		stop := w.start(w.config(turnHandler(pay)))
		runFor(10 * time.Second)
		require.NoError(t, stop())

		posts := w.replies(room)
		require.Len(t, posts, 3)
		for i, key := range turnKeys(id) {
			assert.Equal(t, 1, w.repliesTo(room, key), key)
			assert.Contains(t, posts[i].Content, "[dedup_key:"+key+"]", "in order")
		}
		assert.Contains(t, posts[1].Content, "charged ch_")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
		assert.Len(t, pay.snapshot(), 1)
		reqs := w.band.Requests()
		assert.Zero(t, reqs[fakeband.EndpointContext], "a first delivery reads no room")
		assert.Equal(t, 3, reqs[fakeband.EndpointPost])
		assert.Equal(t, map[string]int{bandonce.DefaultKey(id) + ":event:1": 1}, eventKeys(t, w, room))
	})
}

// eventKeys counts the agent's events in a room by the dedup key in
// their metadata.
func eventKeys(t *testing.T, w *world, room fakeband.Room) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range w.band.ChatEvents(room.ID) {
		var meta map[string]any
		require.NoError(t, json.Unmarshal(e.Metadata, &meta))
		key, _ := meta["dedup_key"].(string)
		out[key]++
	}
	return out
}

// A lost answer to an event's POST: the shell reads the room, finds the
// event by the key in its metadata, and does not post it again.
func TestAnEventWhoseAnswerWasLostIsNotPostedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "refund order 17")
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointEvent, Nth: 1, Kind: fakeband.LoseResponse})
		stop := w.start(w.config(turnHandler(&charges{})))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, map[string]int{bandonce.DefaultKey(id) + ":event:1": 1}, eventKeys(t, w, room))
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointEvent], "never re-sent blind")
		assert.Equal(t, 1, w.band.Requests()[fakeband.EndpointContext], "one room read decided it")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
	})
}

// A crash at every request boundary of a turn with sends and a step,
// before and after Band applied the request, then a fresh shell: every
// send and the reply are in the room once, the message is processed, and
// the payment API saw one idempotency key.
func TestCrashAtEveryRequestBoundaryOfATurn(t *testing.T) {
	crashAtEveryRequestOfATurn(t, 9, "me, chats, next, processing, an event, 3 posts, processed", func() (bandonce.Handler, turnCheck) {
		pay := &charges{}
		return turnHandler(pay), func(t *testing.T, w *world, room fakeband.Room, id string, durable bool) {
			for _, key := range turnKeys(id) {
				assert.Equal(t, 1, w.repliesTo(room, key), key)
			}
			assert.Len(t, w.replies(room), 3)
			assert.Equal(t, map[string]int{bandonce.DefaultKey(id) + ":event:1": 1}, eventKeys(t, w, room))
			assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
			calls := pay.snapshot()
			assert.Len(t, calls, 1, "one idempotency key for the step at every delivery")
			if durable {
				for _, n := range calls {
					assert.Equal(t, 1, n, "the durable journal kept the step from running again")
				}
			}
		}
	})
}

// A step recorded in the durable ledger is not run again on a
// redelivery; its recorded result is returned instead.
func TestAStepRecordedInTheLedgerIsNotRunAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ledger")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "pay")
		pay := &charges{}
		var mu sync.Mutex
		var receipts []string
		var keys []string
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			r, err := m.Step(ctx, "charge", func(ctx context.Context, key string) ([]byte, error) {
				mu.Lock()
				keys = append(keys, key)
				mu.Unlock()
				return pay.charge(ctx, key)
			})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			receipts = append(receipts, string(r))
			mu.Unlock()
			return nil, errors.New("the model timed out") // fail, so Band serves it again
		}
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer ledger.Close()
		cfg := w.config(h)
		cfg.Ledger = ledger
		cfg.MaxAttempts = 3
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, receipts, 3, "three deliveries before the dead letter")
		assert.Equal(t, receipts[0], receipts[1])
		assert.Equal(t, receipts[0], receipts[2])
		assert.Len(t, keys, 1, "fn ran once")
		assert.Equal(t, "processed", w.band.Status(w.agent.ID, id), "dead-lettered")
	})
}

// With a memory ledger a failed delivery (the process lives on) keeps
// the step's record too; fn's key is the same at every delivery.
func TestStepKeysAreStableAndErrorsRecordNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		w.say(room, "pay")
		var mu sync.Mutex
		var keys []string
		runs := 0
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			_, err := m.Step(ctx, "charge", func(ctx context.Context, key string) ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				keys = append(keys, key)
				runs++
				if runs == 1 {
					return nil, errors.New("payment API unavailable")
				}
				return []byte("ok"), nil
			})
			if err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "paid", Mentions: []string{m.SenderID}}, nil
		}
		stop := w.start(w.config(h))
		runFor(time.Minute)
		require.NoError(t, stop())
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, keys, 2, "the failed run recorded nothing, so the step ran again")
		assert.Equal(t, keys[0], keys[1])
		assert.Regexp(t, `^bandonce-[0-9a-f]{32}$`, keys[0])
		assert.Len(t, w.replies(room), 1)
	})
}

// An interrupt or a stop while the handler works between two sends: the
// first is in the room, the second sends nothing and returns the cause,
// and the step after it never runs. An interrupt consumes the message; a
// stop leaves it for replay.
func TestASendAfterAnInterruptOrAStopSendsNothing(t *testing.T) {
	for _, c := range []struct {
		signal string
		cause  error
		status string
	}{{"interrupt", bandonce.ErrInterrupted, "processed"}, {"stop", bandonce.ErrStopped, "processing"}} {
		t.Run(c.signal, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "long task")
				var mu sync.Mutex
				var sendErr, eventErr error
				stepRan := false
				h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
					if err := m.Send(ctx, bandonce.Reply{Content: "starting", Mentions: []string{m.SenderID}}); err != nil {
						return nil, err
					}
					select {
					case <-time.After(time.Minute):
					case <-ctx.Done():
					}
					// A careless handler goes on: the shell must not.
					detached := context.WithoutCancel(ctx)
					mu.Lock()
					defer mu.Unlock()
					sendErr = m.Send(detached, bandonce.Reply{Content: "halfway", Mentions: []string{m.SenderID}})
					eventErr = m.Event(detached, bandonce.Event{Type: bandonce.EventThought, Content: "still going"})
					_, _ = m.Step(detached, "charge", func(context.Context, string) ([]byte, error) {
						stepRan = true
						return nil, nil
					})
					return nil, sendErr
				}
				stop := w.start(w.socketConfig(h))
				time.Sleep(2 * time.Second)
				if c.signal == "interrupt" {
					require.NoError(t, w.band.Interrupt(w.agent.ID, ""))
				} else {
					require.NoError(t, w.band.StopRoom(room.ID))
				}
				runFor(10 * time.Second)
				require.NoError(t, stop())

				mu.Lock()
				defer mu.Unlock()
				assert.ErrorIs(t, sendErr, c.cause)
				assert.ErrorIs(t, eventErr, c.cause)
				assert.False(t, stepRan, "no step after the signal")
				assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)+":send:1"))
				assert.Len(t, w.replies(room), 1, "only the send made before the signal")
				assert.Empty(t, w.band.ChatEvents(room.ID))
				assert.Equal(t, c.status, w.band.Status(w.agent.ID, id))
			})
		})
	}
}

// A stop makes Band refuse posts: a send learns it from the 403 even when
// the push is lost, returns ErrStopped, and the message waits for play.
func TestASendRefusedAsStoppedReturnsErrStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "task")
		require.NoError(t, w.band.StopRoom(room.ID)) // no socket: the shell hears only the 403
		var errs []error
		var mu sync.Mutex
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			err := m.Send(ctx, bandonce.Reply{Content: "starting", Mentions: []string{m.SenderID}})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			if err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "done", Mentions: []string{m.SenderID}}, nil
		}
		stop := w.start(w.config(h))
		runFor(5 * time.Second)
		assert.Equal(t, "delivered", w.band.Status(w.agent.ID, id), "stopped before /next served it")
		require.NoError(t, stop())
		assert.Empty(t, errs, "a stopped room serves nothing")

		// Band's gate opens for /next but the post is refused: the room
		// was stopped again after the message was served.
		require.NoError(t, w.band.PlayRoom(room.ID))
		refuse := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			require.NoError(t, w.band.StopRoom(room.ID))
			return h(ctx, m)
		}
		stop = w.start(w.config(refuse))
		runFor(5 * time.Second)
		require.NoError(t, stop())
		mu.Lock()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], bandonce.ErrStopped)
		mu.Unlock()
		assert.Empty(t, w.replies(room))
		assert.Equal(t, "processing", w.band.Status(w.agent.ID, id), "left for replay")
	})
}

func TestEffectsOutsideTheTurnAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hi")
		kept := make(chan *bandonce.Message, 1)
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			kept <- m
			return nil, nil
		}
		stop := w.start(w.config(h))
		runFor(5 * time.Second)
		require.NoError(t, stop())
		m := <-kept
		ctx := context.Background()
		assert.ErrorIs(t, m.Send(ctx, bandonce.Reply{Content: "late", Mentions: []string{m.SenderID}}), bandonce.ErrNotInTurn)
		assert.ErrorIs(t, m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "late"}), bandonce.ErrNotInTurn)
		_, err := m.Step(ctx, "s", func(context.Context, string) ([]byte, error) { t.Fatal("ran"); return nil, nil })
		assert.ErrorIs(t, err, bandonce.ErrNotInTurn)

		var stray bandonce.Message
		assert.ErrorIs(t, stray.Send(ctx, bandonce.Reply{Content: "x"}), bandonce.ErrNotInTurn)
	})
}

func TestBadEffectsAreRejectedBeforeAnyRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hi")
		var errs []error
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			for _, ev := range []bandonce.Event{
				{Type: "gossip", Content: "x"},
				{Type: bandonce.EventThought, Content: "  "},
				{Type: bandonce.EventThought, Content: "x", Metadata: map[string]any{"dedup_key": "mine"}},
				{Type: bandonce.EventAttention, Content: "may I?"},
				{Type: bandonce.EventThought, Content: "x", DedupKey: "two\nlines"},
			} {
				errs = append(errs, m.Event(ctx, ev))
			}
			errs = append(errs, m.Send(ctx, bandonce.Reply{Content: "", Mentions: []string{m.SenderID}}))
			_, err := m.Step(ctx, "", func(context.Context, string) ([]byte, error) { return nil, nil })
			errs = append(errs, err)
			return nil, nil
		}
		stop := w.start(w.config(h))
		runFor(5 * time.Second)
		require.NoError(t, stop())
		require.Len(t, errs, 7)
		for i, err := range errs {
			var perm *bandonce.PermanentError
			assert.ErrorAs(t, err, &perm, "case %d: %v", i, err)
		}
		assert.Zero(t, w.band.Requests()[fakeband.EndpointPost])
	})
}

func (d *dyingLedger) isDead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead
}

func (d *dyingLedger) SetStep(ctx context.Context, room, id, name string, result []byte) error {
	return d.write(func() error { return d.Ledger.SetStep(ctx, room, id, name, result) })
}

// A crash at every write the durable ledger takes during a turn (each
// effect's intent and outcome, the step's record, the ack), before and
// after the write is durable, then a restart: every effect once, the
// message processed, and the step's fn called again only when the crash
// came between its effect and its durable record, with the same key.
func TestCrashAtEveryLedgerWriteOfATurn(t *testing.T) {
	const stepWrite = 5 // event intent, accepted; send intent, accepted; then the step
	var writes int
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "refund order 17")
		path := filepath.Join(t.TempDir(), "count.ledger")
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer ledger.Close()
		counter := &dyingLedger{Ledger: ledger, at: -1, kill: func() {}}
		cfg := w.config(turnHandler(&charges{}))
		cfg.Ledger = counter
		runConfigWithKill(t, w, cfg, -1, false)
		writes = counter.n
	})
	require.GreaterOrEqual(t, writes, 11, "3 effects x (intent, outcome), the reply's 2, the step, ack-pending, done")
	for at := 1; at <= writes; at++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("write %d, after=%v", at, after), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "agent.ledger")
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t, 1)
					room := w.rooms[0]
					id := w.say(room, "refund order 17")
					pay := &charges{}

					lifeWithDyingLedger(t, w, path, at, after, func(dying *dyingLedger) bandonce.Handler {
						return turnHandler(aliveCharges{pay, dying.isDead})
					})

					ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
					require.NoError(t, err)
					cfg := w.config(turnHandler(pay))
					cfg.Ledger = ledger
					runConfigWithKill(t, w, cfg, -1, false)
					require.NoError(t, ledger.Close())

					for _, key := range turnKeys(id) {
						assert.Equal(t, 1, w.repliesTo(room, key), key)
					}
					assert.Equal(t, map[string]int{bandonce.DefaultKey(id) + ":event:1": 1}, eventKeys(t, w, room))
					assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
					calls := pay.snapshot()
					require.Len(t, calls, 1, "one idempotency key")
					want := 1
					if at == stepWrite && !after {
						want = 2 // the charge happened, its record did not
					}
					for _, n := range calls {
						assert.Equal(t, want, n, "calls of the step's fn")
					}
				})
			})
		}
	}
}

func TestAnInterruptThatCutsAStepSaysWhichStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, 0)
		room := r.rooms[0]
		id := r.say(room, "refund order 17")
		var mu sync.Mutex
		var stepErr error
		var runs []bandonce.StepRun
		started := make(chan struct{})
		cfg := r.config()
		cfg.Handler = func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			_, err := m.Step(ctx, "refund", func(ctx context.Context, _ string) ([]byte, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			})
			mu.Lock()
			stepErr = err
			mu.Unlock()
			return nil, err
		}
		cfg.Hooks.Step = func(_ context.Context, s bandonce.StepRun) {
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, s)
		}
		stop := startOnce(r.world, cfg)
		<-started
		require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
		time.Sleep(time.Minute)
		require.NoError(t, stop())

		mu.Lock()
		defer mu.Unlock()
		require.ErrorIs(t, stepErr, bandonce.ErrInterrupted)
		assert.Contains(t, stepErr.Error(), `step "refund" cut off`)
		require.Len(t, runs, 1)
		assert.Equal(t, "refund", runs[0].Name)
		assert.Equal(t, id, runs[0].MessageID)
		assert.False(t, runs[0].Replayed)
		assert.NotEmpty(t, runs[0].IdempotencyKey)
		assert.ErrorIs(t, runs[0].Err, bandonce.ErrInterrupted)
		assert.True(t, r.logs.has(slog.LevelInfo, "a signal cut a step off", "step=refund"))
		assert.Equal(t, []bandonce.OutcomeKind{bandonce.Interrupted}, r.out.of(id))
	})
}

func TestEveryStepIsLoggedAtDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "hi")
		l := &logs{}
		cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if _, err := m.Step(ctx, "lookup", func(context.Context, string) ([]byte, error) { return []byte("ok"), nil }); err != nil {
				return nil, err
			}
			return echo(ctx, m)
		})
		cfg.Logger = l.logger()
		stop := startOnce(w, cfg)
		time.Sleep(time.Minute)
		require.NoError(t, stop())
		assert.True(t, l.has(slog.LevelDebug, "bandonce: step", "step=lookup", "replayed=false", "key=bandonce-"))
	})
}

// A Step whose fn has effects of its own (an agentloop tool that reports
// progress and stores what it learned) is recorded; the turn fails after
// it. At the redelivery the Step is replayed without running fn, and the
// effects after it keep their keys: counted with fn's, they would take the
// keys fn's effects hold in the room, be found there, and never be made.
func TestAnEffectAfterAReplayedStepIsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		w.say(room, "refund order 17")
		memory := func(text string) bandonce.Memory {
			return bandonce.Memory{Content: text, System: "long_term", Type: "semantic", Segment: "user", Thought: "worth keeping", SubjectID: w.human.ID}
		}
		h := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if _, err := m.Step(ctx, "lookup", func(ctx context.Context, _ string) ([]byte, error) {
				if err := m.Send(ctx, bandonce.Reply{Content: "looking it up"}); err != nil {
					return nil, err
				}
				_, err := m.StoreMemory(ctx, memory("order 17 exists"))
				return []byte("ok"), err
			}); err != nil {
				return nil, err
			}
			if m.Attempt == 1 {
				return nil, errors.New("orders service down")
			}
			if err := m.Send(ctx, bandonce.Reply{Content: "found it"}); err != nil {
				return nil, err
			}
			if _, err := m.StoreMemory(ctx, memory("order 17 refunded")); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "refunded"}, nil
		}
		stop := w.start(w.config(h))
		runFor(time.Minute)
		require.NoError(t, stop())
		posts := map[string]int{}
		for _, p := range w.replies(room) {
			posts[strings.SplitN(bandonce.StripMentions(p.Content), "\n", 2)[0]]++
		}
		assert.Equal(t, map[string]int{"looking it up": 1, "found it": 1, "refunded": 1}, posts)
		memories := map[string]int{}
		for _, mem := range w.band.Memories() {
			memories[mem.Content]++
		}
		assert.Equal(t, map[string]int{"order 17 exists": 1, "order 17 refunded": 1}, memories)
	})
}

// An event's text that ends with a line shaped like a marker is the
// handler's, not a key: the reply under that key is still posted.
func TestAnEventEndingInAMarkerLineHidesNoReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "order-17")
		stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			// A tool's result that quotes a reply of the room.
			if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventToolResult,
				Content: "looked up the thread:\n...\n[dedup_key:order-17]"}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "refunded", Mentions: []string{m.SenderID}, DedupKey: m.Body()}, nil
		}))
		runFor(10 * time.Second)
		require.NoError(t, stop())
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
		assert.Equal(t, 1, w.repliesTo(room, "order-17"), "the person is answered")
	})
}
