package bandonce

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/phoenix"
	"github.com/band-once/bandonce/internal/wire"
)

// Shell carries every message of the agent's rooms through Band's
// lifecycle: /next, processing, the Handler, the guarded post, processed
// (or failed). Create it with New and serve with Run.
type Shell struct {
	cfg    settings
	api    *wire.Client
	client *band.Client // the room tools, for handlers and Client
	jitter *lifecycle.Jitter
	log    *slog.Logger

	jitterSeed uint64
	late       *lateSends    // when each send of unknown outcome has settled
	relist     chan struct{} // buffered(1): list the rooms now (see watchRooms)
	replaying  chan struct{} // buffered(1): held by the Replay running (see Replay)
	// listed: this Run's start has begun listing the rooms, so an
	// agent_rooms join answered from now on may have missed a room_added
	// the listing did not see (see catchUp).
	listed     atomic.Bool
	running    atomic.Bool
	socketUp   atomic.Bool    // pushes are flowing: idle rooms only resync slowly
	socketDone sync.WaitGroup // the socket's goroutine

	mu           sync.Mutex
	me           wire.Agent
	rooms        map[string]*room
	sock         *phoenix.Client
	seen         *lifecycle.SeenSet      // correlation ids of applied control signals
	agentStopped bool                    // an agent-wide stop holds; new rooms start stopped
	fatal        context.CancelCauseFunc // ends Run with an error
	work         sync.WaitGroup          // room goroutines
	run          runContexts
	sched        *scheduler    // runs the rooms; one per Run
	oneShot      *drainTracker // set while Drain runs
	counts       outcomeCounts // this Run's outcomes, for its last log line
	// starting: start has not yet begun this life (late.begin), so a
	// room added meanwhile, by the listing or by a push, waits in
	// unwoken for its first look.
	starting bool
	unwoken  []*room
}

// runContexts are the two lifetimes of one Run: fetching stops when fetch
// ends; running handlers are cancelled when hard ends.
type runContexts struct {
	fetch context.Context
	hard  context.Context
	// socket ends the socket: on a clean shutdown only once every round
	// has ended, so that a signal still reaches a handler that runs in
	// the shutdown's grace.
	socket context.Context
}

// New validates cfg and returns a Shell. It makes no request.
func New(cfg Config) (*Shell, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	seed := s.Retry.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	doer := wire.NewRetryDoer(s.HTTPClient, wire.RetryOptions{
		MaxAttempts:   s.Retry.MaxAttempts,
		BaseDelay:     s.Retry.BaseDelay,
		MaxDelay:      s.Retry.MaxDelay,
		MaxRetryAfter: s.Retry.MaxRetryAfter,
		Seed:          seed,
		Logger:        s.Logger,
		Observe:       requestObserver(s.Hooks.Request),
	})
	toolsRetry := s.Retry // the shell's policy, with a jitter stream of its own
	toolsRetry.Seed = seed + 3
	client, err := band.New(band.Config{
		// The shell's own REST client: the room tools share its request budget.
		APIKey: s.apiKey.Value(), BaseURL: s.baseURL.String(), HTTPClient: s.HTTPClient, RequestTimeout: s.RequestTimeout,
		Retry:  toolsRetry,
		Logger: s.Logger, InsecurePlaintext: s.InsecurePlaintext, MaxResponseBytes: s.MaxResponseBytes,
	})
	if err != nil {
		return nil, err // withDefaults checked every field it reads
	}
	api := wire.NewClient(s.baseURL.String(), s.apiKey.Value(), doer)
	api.SetMaxBodyBytes(s.MaxResponseBytes)
	return &Shell{
		client:     client,
		cfg:        s,
		jitterSeed: seed,
		api:        api,
		jitter:     lifecycle.NewJitter(seed + 1),
		log:        s.Logger,
		relist:     make(chan struct{}, 1),
		replaying:  make(chan struct{}, 1),
		late:       newLateSends(s.SettleWindow),
		rooms:      make(map[string]*room),
	}, nil
}

// Client returns a client for Band's room tools built from the shell's
// Config, for use outside handlers (inside one, Message has them).
func (s *Shell) Client() *band.Client { return s.client }

// ErrAlreadyRunning is returned by a second concurrent call to Run.
var ErrAlreadyRunning = errors.New("bandonce: Run already in progress")

// Run serves until ctx ends or a fatal error: a rejected API key
// (ErrUnauthorized), or ErrSuperseded. When ctx ends, Run stops fetching,
// lets running handlers finish for up to ShutdownTimeout, then cancels them
// with ErrShutdown; it returns nil after every goroutine it started has
// ended. Nothing is marked on shutdown.
func (s *Shell) Run(ctx context.Context) error { return s.serve(ctx, nil) }

// serve is Run, and Drain when oneShot is set.
func (s *Shell) serve(ctx context.Context, oneShot *drainTracker) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer s.running.Store(false)

	fetch, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	hard, cancelHard := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHard(nil)
	sock, closeSocket := context.WithCancelCause(context.WithoutCancel(ctx))
	defer closeSocket(nil)
	fatal := func(err error) {
		fail(err)
		if errors.Is(err, ErrSuperseded) {
			// Another connection took over: nothing more may be sent,
			// not even by a handler in a shutdown's grace.
			cancelHard(err)
			closeSocket(err)
		}
	}
	sched := newScheduler(s)
	s.mu.Lock()
	s.fatal, s.run, s.oneShot, s.sched = fatal, runContexts{fetch: fetch, hard: hard, socket: sock}, oneShot, sched
	s.counts = outcomeCounts{}
	s.mu.Unlock()
	began := time.Now()
	s.work.Go(func() { sched.run(fetch, hard) })

	err := s.start(fetch)
	started := err == nil
	if err == nil {
		if oneShot != nil {
			oneShot.arm(fetch, fail)
		}
		<-fetch.Done()
		err = context.Cause(fetch)
	}
	// A failed start-up stops the scheduler too.
	fatal(err)
	clean := errors.Is(err, errDrained) || // every room drained: a one-shot run's end
		(ctx.Err() != nil && errors.Is(err, context.Cause(ctx))) // the caller ended Run
	if !clean {
		// A rejected key, a supersede, a failed start: nothing to listen for.
		closeSocket(err)
	}
	s.shutdown(cancelHard, closeSocket)
	if started && !errors.Is(err, errDrained) { // Drain says so itself; a failed start is in err
		s.logStopped(err, clean, began)
	}
	if clean {
		return nil
	}
	return err
}

// start learns who the agent is and starts its rooms. Its calls to Band
// are bounded by StartTimeout (see startCall).
func (s *Shell) start(ctx context.Context) error {
	budget, spent := context.WithTimeoutCause(ctx, s.cfg.StartTimeout, errStartBudget)
	defer spent()
	api := s.startClient()
	me, err := s.identify(budget, api)
	if err != nil {
		return err
	}

	s.mu.Lock()
	s.starting = true
	s.mu.Unlock()
	s.listed.Store(false)
	// From here on this life may send: a room whose topic's join is
	// answered during start looks at /next at once (catchUp). Every send
	// of an earlier life (another process, a superseded connection, an
	// earlier Run) was written before now.
	s.late.begin(time.Now())
	socket := "disabled"
	if !s.cfg.DisableSocket {
		// Connect before any handler can start, so that a signal sent
		// the moment work begins finds its handler in place, and before
		// the rooms are listed, so that a room the agent joins after the
		// listing is announced on agent_rooms, joined by then.
		connected := s.startSocket(ctx, s.run.socket, me.ID)
		wait := time.NewTimer(socketStartWait)
		select {
		case <-connected:
		case <-ctx.Done():
		case <-wait.C:
			s.log.Warn("bandonce: socket not connected yet; serving by polling until it is")
		}
		wait.Stop()
		socket = s.socketState() // as start found it, whatever a shutdown does next
	}
	ids := s.cfg.Rooms
	if len(ids) == 0 {
		s.listed.Store(true)
		chats, err := startCall(budget, s, wire.EndpointChats, api.Chats)
		if err != nil {
			return err
		}
		for _, c := range chats {
			ids = append(ids, c.ID)
		}
	}
	for _, id := range ids {
		s.addRoom(id)
	}
	s.logServing(me, ids, socket)
	s.mu.Lock()
	s.starting = false
	unwoken := s.unwoken
	s.unwoken = nil
	s.mu.Unlock()
	for _, r := range unwoken {
		s.sched.wake(r)
	}
	if len(s.cfg.Rooms) == 0 {
		s.work.Add(1)
		go func() {
			defer s.work.Done()
			s.watchRooms(ctx)
		}()
	}
	return nil
}

// socketStartWait bounds how long Run waits for the socket before serving
// rooms without it; the socket keeps trying in the background.
const socketStartWait = 5 * time.Second

// asFatal returns the error Run should end with, or nil if err may pass:
// a 401 anywhere means the key was rejected or revoked.
func asFatal(err error) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
		return fmt.Errorf("%w: %w", ErrUnauthorized, apiErr)
	}
	if errors.Is(err, ErrCrossOriginRedirect) {
		return fmt.Errorf("bandonce: Band's REST root must not redirect to another origin (check where it was set: BAND_BASE_URL or BAND_REST_URL through ConfigFromEnv, or Config.BaseURL): %w", err)
	}
	return nil
}

// addRoom starts serving a room unless it already is; it reports whether
// it did.
func (s *Shell) addRoom(id string) bool {
	if !s.startRoom(id) {
		return false
	}
	s.roomEvent(id, true) // outside the lock: a hook may call the Shell
	return true
}

func (s *Shell) startRoom(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run.fetch == nil || s.run.fetch.Err() != nil {
		return false
	}
	if old, ok := s.rooms[id]; ok {
		// A room the agent left still runs until its round ends; back in
		// it now, the agent is served again once that room is gone.
		old.rejoined = errors.Is(context.Cause(old.fetch), errRoomRemoved)
		return false
	}
	r := newRoom(s, s.sched, id)
	if s.agentStopped {
		r.ctl.setStopped(time.Now())
	}
	if s.oneShot != nil {
		s.oneShot.add(r)
	}
	r.fetch, r.leave = context.WithCancelCause(s.run.fetch)
	s.rooms[id] = r
	if s.sock != nil {
		s.sock.Join("chat_room:"+id, r.onRoomEvent)
	}
	// Its first look is now, joined or not (once start has begun the
	// life): a backlog is served while the joins are still being
	// answered. A message said after this look and before its topic's
	// join is answered was pushed to nobody, so the answered join wakes
	// the room again (catchUp): one more look after the first, whichever
	// of the two came first, so that the number of looks, and the
	// prover's replay, does not depend on it.
	if s.starting {
		s.unwoken = append(s.unwoken, r)
	} else {
		s.sched.wake(r)
	}
	return true
}

// errRoomRemoved ends a room's loop when the agent leaves the room.
var errRoomRemoved = errors.New("bandonce: agent removed from the room")

// removeRoom stops serving a room the agent left. A handler in flight
// finishes; Band refuses what it posts if the agent is really gone.
func (s *Shell) removeRoom(id string) {
	s.mu.Lock()
	r := s.rooms[id]
	if r != nil {
		r.rejoined = false
		r.leave(errRoomRemoved)
	}
	s.mu.Unlock()
	if r != nil {
		r.ctl.poke() // so the scheduler lets it go now
	}
}

// roomEnded forgets a room the scheduler no longer runs.
func (s *Shell) roomEnded(r *room) {
	r.leave(nil)
	r.oneShot(func(d *drainTracker) { d.gone(r) })
	s.mu.Lock()
	ours := s.rooms[r.id] == r
	rejoined := ours && r.rejoined
	if ours {
		delete(s.rooms, r.id)
		if s.sock != nil {
			s.sock.Leave("chat_room:" + r.id)
		}
	}
	s.mu.Unlock()
	if ours {
		s.roomEvent(r.id, false)
	}
	if rejoined {
		s.addRoom(r.id)
	}
}

// failRun ends Run with err.
func (s *Shell) failRun(err error) {
	s.mu.Lock()
	fail := s.fatal
	s.mu.Unlock()
	if fail != nil {
		fail(err)
	}
}

// shutdown waits for the rooms: first as long as ShutdownTimeout allows,
// then after cancelling their handlers with ErrShutdown.
func (s *Shell) shutdown(cancelHard, closeSocket context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() {
		// The socket stays up while rounds end, so that an interrupt or
		// a stop still reaches a handler running in the grace.
		s.work.Wait()
		closeSocket(nil)
		s.socketDone.Wait()
		close(done)
	}()
	grace := time.NewTimer(s.cfg.ShutdownTimeout)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		s.log.Warn("bandonce: shutdown timeout; cancelling running handlers")
		cancelHard(ErrShutdown)
		<-done
	}
	s.mu.Lock()
	served := make([]string, 0, len(s.rooms))
	for id, r := range s.rooms {
		r.leave(nil)
		served = append(served, id)
	}
	s.rooms = make(map[string]*room)
	s.sock, s.seen, s.agentStopped, s.oneShot, s.sched = nil, nil, false, nil, nil
	s.mu.Unlock()
	slices.Sort(served)
	for _, id := range served {
		s.roomEvent(id, false)
	}
}

func (s *Shell) agentID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.me.ID
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
