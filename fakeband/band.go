package fakeband

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Band is the fake platform. All its methods are safe for concurrent use.
type Band struct {
	mu  sync.Mutex
	ids ids
	now func() time.Time
	rng *rand.Rand // probabilistic faults only, so ids do not depend on them

	owner           *participant
	participants    map[string]*participant
	people          []*participant // every participant in creation order, for listings
	byKey           map[string]*participant
	byHandle        map[string]*participant
	rooms           map[string]*room
	roomOrder       []string
	messages        map[string]*message
	deliveries      map[deliveryKey]*delivery
	executions      map[pairKey]*execution
	lastDone        map[pairKey]string         // message most recently processed, for StaleNext
	doneUpTo        map[pairKey]int            // room messages before this index hold nothing for the agent
	contacts        map[string]map[string]bool // agent id -> its contacts' participant ids
	memories        []*memory                  // the one organization's, in creation order
	tasks           map[string][]*task         // by room, in board order
	taskNumbers     map[string]int             // by room: the last board number handed out
	boards          map[string]*board          // by room
	contactRequests []*contactRequest          // in the order they were sent
	created         []CreatedRoom              // rooms agents created, in order

	truth  truth
	feed   feed       // the admin API's live feed (Options.Admin only)
	log    requestLog // the agents' recent requests (Options.Admin only)
	faults faultState
	// mayHold is whether a fault rule may hold a request (Delay,
	// ApplyLate): while none may, HTTPClient serves a plain request on
	// the caller's goroutine (see inlineTransport).
	mayHold atomic.Bool
	rate    limiter
	nReq    int // request ids
	nCtl    int // correlation ids of control pushes

	sockets sockets

	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup // every goroutine the Band started
	servers []*http.Server
	handler http.Handler
	api     []route // the REST routes, bound to this Band
}

// New returns an empty Band with one operator human (Owner) and no rooms.
func New(opts Options) *Band {
	b := &Band{
		ids:          ids{seed: uint64(opts.Seed)},
		now:          opts.Now,
		rng:          rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		participants: map[string]*participant{},
		byKey:        map[string]*participant{},
		byHandle:     map[string]*participant{},
		rooms:        map[string]*room{},
		messages:     map[string]*message{},
		deliveries:   map[deliveryKey]*delivery{},
		executions:   map[pairKey]*execution{},
		lastDone:     map[pairKey]string{},
		doneUpTo:     map[pairKey]int{},
		contacts:     map[string]map[string]bool{},
		tasks:        map[string][]*task{},
		taskNumbers:  map[string]int{},
		boards:       map[string]*board{},
		closing:      make(chan struct{}),
	}
	if b.now == nil {
		b.now = steppingClock()
	}
	b.truth.init()
	if opts.Admin {
		b.feed = feed{on: true, subs: map[*subscriber]struct{}{}}
		b.truth.feed = &b.feed
		b.log.on = true
	}
	b.faults.init()
	b.rate.buckets = map[string]*bucket{}
	if opts.RateLimit != nil {
		if err := opts.RateLimit.validate(); err == nil {
			copied := *opts.RateLimit
			b.rate.limit = &copied
		}
	}
	b.sockets.init()
	b.owner = b.addParticipantLocked("Owner", typeUser)
	b.handler = b.routes(opts.Admin)
	return b
}

// Close ends every socket and listener and waits for the Band's
// goroutines. Requests after Close are answered 503; Close is idempotent.
func (b *Band) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	close(b.closing)
	servers := b.servers
	b.servers = nil
	conns := b.sockets.all()
	b.mu.Unlock()

	var firstErr error
	for _, s := range servers {
		if err := s.Close(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, c := range conns {
		c.abort()
	}
	b.wg.Wait()
	return firstErr
}

// stamp reads the clock; callers hold b.mu.
func (b *Band) stamp() time.Time { return b.now().UTC() }
