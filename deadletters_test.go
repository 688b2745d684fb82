package bandonce_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
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

// ordersService answers "shipped: <body>" unless down, counting its runs
// in calls (when not nil): a handler whose dependency is out until the
// test says it is back.
func ordersService(down *atomic.Bool, calls *atomic.Int32) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if calls != nil {
			calls.Add(1)
		}
		if down.Load() {
			return nil, errors.New("orders service: connection refused")
		}
		return &bandonce.Reply{Content: "shipped: " + m.Body()}, nil
	}
}

func TestADeadLetterIsKeptAndAReplayAnswersItOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "where is order 17?")
		var down atomic.Bool
		down.Store(true)
		var calls atomic.Int32
		ledger := bandonce.NewMemoryLedger()
		cfg := w.config(ordersService(&down, &calls))
		cfg.MaxAttempts = 2
		cfg.Ledger = ledger
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(time.Minute)

		dead, err := s.DeadLetters(context.Background())
		require.NoError(t, err)
		require.Len(t, dead, 1)
		d := dead[0]
		assert.Equal(t, room.ID, d.RoomID)
		assert.Equal(t, id, d.MessageID)
		assert.Equal(t, w.human.ID, d.SenderID)
		assert.Equal(t, "where is order 17?", d.Body())
		assert.Equal(t, 2, d.Failures)
		assert.Contains(t, d.Reason, "connection refused")
		assert.NoError(t, d.Err, "the error itself is not kept")
		assert.False(t, d.At.IsZero())
		require.Len(t, w.errorEvents(room), 1)
		assert.Empty(t, w.replies(room))

		down.Store(false)
		o, err := s.Replay(context.Background(), room.ID, id)
		require.NoError(t, err)
		assert.Equal(t, bandonce.Replied, o.Kind)
		assert.Equal(t, bandonce.DefaultKey(id), o.DedupKey)
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "answered under the message's own key")
		assert.Equal(t, []string{w.human.ID}, w.replies(room)[0].Mentions)

		_, err = s.Replay(context.Background(), room.ID, id)
		assert.ErrorIs(t, err, bandonce.ErrNotDeadLettered, "a second replay finds nothing to replay")
		assert.Len(t, w.replies(room), 1, "and posts nothing")
		left, err := s.DeadLetters(context.Background())
		require.NoError(t, err)
		assert.Empty(t, left)
		cancel()
		require.NoError(t, <-done)
	})
}

func TestAReplayAfterACrashedReplayAnswersOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		ledger := bandonce.NewMemoryLedger()
		d := bandonce.DeadLetter{RoomID: room.ID, MessageID: id, SenderID: w.human.ID, Content: "hi", Failures: 3, At: time.Now()}
		require.NoError(t, ledger.AddDeadLetter(context.Background(), d))
		cfg := w.config(echo)
		cfg.Ledger = ledger
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		// The first replay's POST lands, its answer is lost and the room
		// cannot be read to tell: the operator's replay ends not knowing.
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointContext, Nth: 2, Count: 1000, Kind: fakeband.FailBefore, Status: 503})
		_, err = s.Replay(context.Background(), room.ID, id)
		require.Error(t, err)
		w.band.ClearFaults()
		dead, err := s.DeadLetters(context.Background())
		require.NoError(t, err)
		require.Len(t, dead, 1, "kept while its answer is unknown")

		o, err := s.Replay(context.Background(), room.ID, id)
		require.NoError(t, err)
		assert.Equal(t, bandonce.DuplicateDropped, o.Kind, "the guard finds the first replay's answer")
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)))
	})
}

func TestAReplayThatFailsKeepsTheDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		ledger := bandonce.NewMemoryLedger()
		require.NoError(t, ledger.AddDeadLetter(context.Background(), bandonce.DeadLetter{RoomID: room.ID, MessageID: "m1", Content: "hi"}))
		cfg := w.config(func(context.Context, *bandonce.Message) (*bandonce.Reply, error) {
			return nil, errors.New("still down")
		})
		cfg.Ledger = ledger
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		_, err = s.Replay(context.Background(), room.ID, "m1")
		assert.ErrorContains(t, err, "still down")
		dead, _ := s.DeadLetters(context.Background())
		assert.Len(t, dead, 1)
		assert.Empty(t, w.replies(room))
	})
}

func TestDeadLettersNeedALedgerThatKeepsThem(t *testing.T) {
	cfg := bandonce.Config{APIKey: "k", Handler: echo, Ledger: plainLedger{bandonce.NewMemoryLedger()}}
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	_, err = s.DeadLetters(context.Background())
	assert.ErrorIs(t, err, bandonce.ErrNoDeadLetters)
	_, err = s.Replay(context.Background(), "r", "m")
	assert.ErrorIs(t, err, bandonce.ErrNoDeadLetters)
}

// plainLedger is a Ledger and nothing more.
type plainLedger struct{ l *bandonce.MemoryLedger }

func (p plainLedger) Key(ctx context.Context, room, key string) (bandonce.KeyState, error) {
	return p.l.Key(ctx, room, key)
}
func (p plainLedger) SetKey(ctx context.Context, room, key string, s bandonce.KeyState) error {
	return p.l.SetKey(ctx, room, key, s)
}
func (p plainLedger) AckPending(ctx context.Context, room, id string) (bool, error) {
	return p.l.AckPending(ctx, room, id)
}
func (p plainLedger) SetAckPending(ctx context.Context, room, id string, v bool) error {
	return p.l.SetAckPending(ctx, room, id, v)
}
func (p plainLedger) Step(ctx context.Context, room, id, name string) ([]byte, bool, error) {
	return p.l.Step(ctx, room, id, name)
}
func (p plainLedger) SetStep(ctx context.Context, room, id, name string, r []byte) error {
	return p.l.SetStep(ctx, room, id, name, r)
}
func (p plainLedger) Durable() bool { return false }

// An operator's replay (bandonce deadletters replay: a Shell that never
// Runs) dies while Band holds its reply's POST; the operator replays
// again from a new process on the same bolt ledger. The held POST lands
// after the second replay's guard read the room: two replies.
func TestAReplayAfterAReplayKilledMidPOSTAnswersOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ledger")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		open := func() *boltledger.Ledger {
			l, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
			require.NoError(t, err)
			return l
		}
		// The processes share the ledger file; bolt locks it, so the
		// one Ledger stands for both, the first's writing nothing once
		// it is dead.
		l := open()
		defer l.Close()
		require.NoError(t, l.AddDeadLetter(context.Background(), bandonce.DeadLetter{RoomID: room.ID, MessageID: id,
			SenderID: w.human.ID, Content: "hi", Failures: 3, At: time.Now()}))
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.ApplyLate, Delay: 3 * time.Second})

		// The first process: killed a second into its replay.
		dt := &deadTransport{next: w.band.HTTPClient().Transport, dead: make(chan struct{})}
		cfg := w.config(echo)
		cfg.Ledger, cfg.HTTPClient = &deadProcLedger{l, dt.dead}, &http.Client{Transport: dt}
		first, err := bandonce.New(cfg)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := first.Replay(context.Background(), room.ID, id); done <- err }()
		time.Sleep(time.Second)
		close(dt.dead)
		// (A dead process does not wait; its replay ends on its own.)
		defer func() { <-done }()

		// The second process, on the same ledger.
		cfg = w.config(echo)
		cfg.Ledger = l
		second, err := bandonce.New(cfg)
		require.NoError(t, err)
		o, err := second.Replay(context.Background(), room.ID, id)
		require.NoError(t, err)
		time.Sleep(time.Minute)
		assert.Equal(t, bandonce.DuplicateDropped, o.Kind, "the first replay's reply, applied late, is found")
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "one answer")
	})
}

// deadProcLedger is a ledger that writes nothing once its process is dead.
type deadProcLedger struct {
	*boltledger.Ledger
	dead chan struct{}
}

func (d *deadProcLedger) isDead() error {
	select {
	case <-d.dead:
		return errKilled
	default:
		return nil
	}
}

func (d *deadProcLedger) SetKey(ctx context.Context, room, key string, s bandonce.KeyState) error {
	if err := d.isDead(); err != nil {
		return err
	}
	return d.Ledger.SetKey(ctx, room, key, s)
}

func (d *deadProcLedger) SetStep(ctx context.Context, room, msg, name string, r []byte) error {
	if err := d.isDead(); err != nil {
		return err
	}
	return d.Ledger.SetStep(ctx, room, msg, name, r)
}

func (d *deadProcLedger) RemoveDeadLetter(ctx context.Context, room, msg string) error {
	if err := d.isDead(); err != nil {
		return err
	}
	return d.Ledger.RemoveDeadLetter(ctx, room, msg)
}

// Two replays of one dead letter at once answer once: the second waits
// for the first. (Side by side, both passed the guard before either's
// intent was on record, and both posted; the ledger here holds the first
// intent back for a minute, or until a second one comes.)
func TestTwoReplaysAtOnceAnswerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		ledger := &intentsMeet{MemoryLedger: bandonce.NewMemoryLedger(), met: make(chan struct{})}
		d := bandonce.DeadLetter{RoomID: room.ID, MessageID: id, SenderID: w.human.ID, Content: "hi", Failures: 3, At: time.Now()}
		require.NoError(t, ledger.AddDeadLetter(context.Background(), d))
		cfg := w.config(echo)
		cfg.Ledger = ledger
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		var wg sync.WaitGroup
		outs := make([]bandonce.Outcome, 2)
		for i := range 2 {
			wg.Go(func() {
				var err error
				outs[i], err = s.Replay(context.Background(), room.ID, id)
				if err != nil {
					// The second may find the dead letter already gone.
					assert.ErrorIs(t, err, bandonce.ErrNotDeadLettered)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 1, w.repliesTo(room, bandonce.DefaultKey(id)), "two replays at once answer once")
		assert.Contains(t, []bandonce.OutcomeKind{outs[0].Kind, outs[1].Kind}, bandonce.Replied)
	})
}

// intentsMeet holds the first intent written until a second is written,
// or a minute has passed: two sends that have both passed the guard.
type intentsMeet struct {
	*bandonce.MemoryLedger
	mu     sync.Mutex
	intent int
	met    chan struct{}
}

func (l *intentsMeet) SetKey(ctx context.Context, room, key string, st bandonce.KeyState) error {
	if st == bandonce.KeyIntent {
		l.mu.Lock()
		l.intent++
		n := l.intent
		l.mu.Unlock()
		switch n {
		case 1:
			select {
			case <-l.met:
			case <-time.After(time.Minute):
			}
		case 2:
			close(l.met)
		}
	}
	return l.MemoryLedger.SetKey(ctx, room, key, st)
}

// A crash as the dead letter is being kept (its failed mark posted, its
// record not yet written) leaves nothing that says it began: the next
// life gives the message up again, and keeps it, once, for a replay.
func TestACrashAsADeadLetterIsKeptLeavesItToTheNextLife(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ledger")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		room := w.rooms[0]
		id := w.say(room, "hi")
		ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		ks := &killSwitch{next: w.band.HTTPClient().Transport, at: -1}
		dying := &diesAtKeep{Ledger: ledger, kill: ks.killNow}
		cfg := w.config(permanentFailure)
		cfg.Ledger = dying
		lifeUntilItsLedgerKillsIt(t, cfg, ks)
		require.NoError(t, ledger.Close())
		require.True(t, dying.isDead(), "the crash happened")

		second, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
		require.NoError(t, err)
		defer second.Close()
		cfg = w.config(permanentFailure)
		cfg.Ledger = second
		stop := w.start(cfg)
		runFor(time.Minute)
		require.NoError(t, stop())
		dead, err := second.DeadLetters(context.Background())
		require.NoError(t, err)
		assert.Len(t, dead, 1, "kept once, for a replay")
		assert.Len(t, w.errorEvents(room), 1, "the room is told once")
		assert.Equal(t, fakeband.StatusProcessed, w.band.Status(w.agent.ID, id))
	})
}

// diesAtKeep crashes the process as it writes a dead letter: that write
// and every one after it never reach the ledger.
type diesAtKeep struct {
	*boltledger.Ledger
	kill func()

	mu   sync.Mutex
	dead bool
}

func (d *diesAtKeep) isDead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead
}

func (d *diesAtKeep) AddDeadLetter(context.Context, bandonce.DeadLetter) error {
	d.mu.Lock()
	d.dead = true
	d.mu.Unlock()
	d.kill()
	return errKilled
}

func (d *diesAtKeep) SetKey(ctx context.Context, room, key string, s bandonce.KeyState) error {
	if d.isDead() {
		return errKilled
	}
	return d.Ledger.SetKey(ctx, room, key, s)
}

func (d *diesAtKeep) SetAckPending(ctx context.Context, room, id string, pending bool) error {
	if d.isDead() {
		return errKilled
	}
	return d.Ledger.SetAckPending(ctx, room, id, pending)
}

func (d *diesAtKeep) SetStep(ctx context.Context, room, id, name string, result []byte) error {
	if d.isDead() {
		return errKilled
	}
	return d.Ledger.SetStep(ctx, room, id, name, result)
}

// interruptAFinishingDeadLetter runs a handler that gives up for good on
// one message whose dead letter's failed marks fail failedMarks times
// (five tries a delivery), and interrupts the room in the claim of the
// delivery that finishes the dead letter. It returns what the room
// holds, once the rounds that followed are over.
func interruptAFinishingDeadLetter(t *testing.T, failedMarks int) (r *rig, id string, calls int, ledger *bandonce.MemoryLedger) {
	r = newRig(t, 1, 0)
	room := r.rooms[0]
	cfg := r.config()
	ledger = bandonce.NewMemoryLedger()
	cfg.Ledger = ledger
	cfg.Handler = func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		calls++
		return nil, bandonce.Permanent(errors.New("this request cannot be done"))
	}
	// The next delivery's claim is slow, so the interrupt lands in it.
	r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointFailed, Nth: 1, Count: failedMarks, Kind: fakeband.FailBefore, Status: 503})
	r.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointProcessing, Nth: 2, Kind: fakeband.Delay, Delay: 10 * time.Second})
	stop := startOnce(r.world, cfg)
	time.Sleep(time.Second) // the socket is up
	id = r.say(room, "do the impossible")
	for r.tap.count("processing", room.ID) < 2 {
		time.Sleep(100 * time.Millisecond)
	}
	synctest.Wait()
	require.Equal(t, 5, r.band.FaultsFired()["failed/fail_before"], "the first dead letter's failed mark did not land")
	require.NoError(t, r.band.Interrupt(r.agent.ID, room.ID))
	time.Sleep(2 * time.Minute)
	require.NoError(t, stop())
	require.Equal(t, failedMarks, r.band.FaultsFired()["failed/fail_before"])
	return r, id, calls, ledger
}

// The handler gave up for good and the dead letter's failed mark did not
// land, so the next delivery finishes it. An interrupt that lands in that
// delivery's claim finds no turn to abort (the handler never runs again):
// it withholds the room's notice, but the message stays a dead letter,
// kept for Shell.Replay, as it is when the failed mark landed.
func TestAnInterruptDoesNotEraseADeadLetterBeingFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, id, calls, ledger := interruptAFinishingDeadLetter(t, 5)
		assert.Equal(t, 1, calls, "the handler ran once")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
		assert.Contains(t, r.out.of(id), bandonce.DeadLettered, "given up on, the message is still a dead letter")
		dead, err := ledger.DeadLetters(context.Background())
		require.NoError(t, err)
		assert.Len(t, dead, 1, "kept, for a replay")
		assert.Empty(t, r.errorEvents(r.rooms[0]), "the interrupt withheld the room's notice")
	})
}

// An interrupt's withholding of the notice is for good: when the
// interrupted delivery's failed mark does not land either, the next
// delivery, with no signal, finishes the dead letter and still tells no
// one.
func TestADeadLetterNoticeAnInterruptWithheldIsNotPostedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, id, calls, _ := interruptAFinishingDeadLetter(t, 10)
		assert.Equal(t, 1, calls, "the handler ran once")
		assert.Equal(t, fakeband.StatusProcessed, r.band.Status(r.agent.ID, id))
		assert.Empty(t, r.errorEvents(r.rooms[0]), "the interrupt withheld the room's notice: it is not posted later")
	})
}
