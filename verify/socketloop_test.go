package verify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/internal/wire"
	"github.com/band-once/bandonce/proof"
)

// sockFlaws are defects of the socket loop below, each a switch. The zero
// value is a correct loop.
type sockFlaws struct {
	replayInterrupt   bool // an interrupted turn is left for Band to serve again, not consumed
	effectUncancelled bool // the effect runs on the life's context: a signal is only looked at after it
	ignoreSupersede   bool // the supersede push is ignored; the loop polls on without its socket
	noControlTopic    bool // the socket joins agent_rooms only, so no control push reaches it
	ignoreAgentWide   bool // a signal without a room_id (agent-wide) is ignored
	armLate           bool // the turn is armed after the processing mark: a signal before finds none
	debounce          bool // a second signal of one mode within five seconds is taken for a repeat
	controlOnce       bool // agent_control is joined on the first connection only
	leaveRooms        bool // on supersede the loop returns, but its rooms' goroutine works on
	skipAfterIdle     bool // an interrupt that found no turn is kept for the room's next message
	ackBeforeCancel   bool // an interrupt marks the message processed first, then cancels the turn
}

var errSupersededLoop = errors.New("another connection of the agent took over")

// sockLoop is an agent with its own loop over Band's REST API and its own
// Phoenix socket client (coder/websocket, V2 frames), without the Shell:
// it polls every room's /next, and hears interrupt, stop, play, supersede
// and room_added on the socket. A turn is armed from the moment /next
// serves a message; an interrupt consumes it, a stop leaves it for replay
// and keeps the room's handlers from starting until play (or until /next
// serves a message asked for after the stop, which proves a play the
// socket missed).
func sockLoop(fl sockFlaws) Factory {
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			hc := &http.Client{Transport: env.HTTPClient.Transport, Timeout: requestTimeout}
			a := &sockAgent{fl: fl, env: env, c: wire.NewClient(env.BaseURL, env.APIKey, sendOnce{hc}),
				rooms: map[string]*sockRoom{}, seen: map[string]bool{}, ackPending: map[string]bool{}}
			return a.run(ctx)
		}
	}
}

type sockAgent struct {
	fl   sockFlaws
	env  Env
	c    *wire.Client
	me   string
	end  context.CancelCauseFunc
	life context.Context // the life's context, which a supersede does not end
	// began is this life's start: an earlier life's POST may land until
	// began+settle.
	began time.Time

	mu         sync.Mutex
	order      []string // rooms, in the order found
	rooms      map[string]*sockRoom
	seen       map[string]bool // correlation ids already handled
	ackPending map[string]bool // messages whose fate is decided; only the processed mark is owed
	lastSignal map[string]time.Time
	connected  int // connections opened
}

type sockRoom struct {
	stopped  bool
	skipNext bool // skipAfterIdle: an interrupt waits for the next turn
	epoch    int  // counts the stops heard, so a /next that a stop overtook is known
	cur      *sockTurn
}

// sockTurn is the turn in flight in a room, from /next's answer to its
// fate.
type sockTurn struct {
	abort     string // "interrupt" or "stop", the last signal wins
	late      string // a signal after the commit
	committed bool
	cancel    context.CancelCauseFunc
	room, msg string
}

func (a *sockAgent) run(ctx context.Context) error {
	a.life, a.began = ctx, time.Now()
	ctx, a.end = context.WithCancelCause(ctx)
	defer a.end(nil)
	for ctx.Err() == nil {
		me, err := a.c.Me(ctx)
		if err == nil && a.relist(ctx) == nil {
			a.me = me.ID
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.socket(ctx) })
	defer wg.Wait()
	if a.fl.leaveRooms {
		// The flaw: the rooms' goroutine is left to drain what waits
		// (its requests are not cancelled), and the loop returns
		// without waiting for it.
		go a.loop(ctx, context.WithoutCancel(ctx))
		<-ctx.Done()
		return nil
	}
	a.loop(ctx, ctx)
	return nil
}

// loop serves the rooms until ctx ends, each turn on turnCtx; once ctx
// has ended, a turnCtx that lives on drains the rooms first.
func (a *sockAgent) loop(ctx, turnCtx context.Context) {
	for idle := 0; turnCtx.Err() == nil; {
		busy := false
		for _, room := range a.roomIDs() {
			busy = a.serve(turnCtx, room) || busy
		}
		if busy {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		pause(ctx, 200*time.Millisecond)
		if idle++; idle%5 == 0 {
			_ = a.relist(ctx) // a room_added push may have been lost
		}
	}
}

func (a *sockAgent) relist(ctx context.Context) error {
	chats, err := a.c.Chats(ctx)
	if err != nil {
		return err
	}
	for _, ch := range chats {
		a.addRoom(ch.ID)
	}
	return nil
}

func (a *sockAgent) addRoom(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rooms[id] == nil {
		a.rooms[id] = &sockRoom{}
		a.order = append(a.order, id)
	}
}

func (a *sockAgent) roomIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.order...)
}

// socket keeps a connection up until the life ends or it is superseded.
func (a *sockAgent) socket(ctx context.Context) {
	for ctx.Err() == nil {
		if a.listen(ctx) {
			return // superseded
		}
		pause(ctx, 300*time.Millisecond)
	}
}

// listen serves one connection; it reports whether it was superseded.
func (a *sockAgent) listen(ctx context.Context) bool {
	header := http.Header{}
	header.Set("X-Api-Key", a.env.APIKey)
	conn, resp, err := websocket.Dial(ctx, a.env.SocketURL+"?vsn=2.0.0", &websocket.DialOptions{HTTPClient: a.env.HTTPClient, HTTPHeader: header})
	if resp != nil && resp.Body != nil && err != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return false
	}
	defer func() { _ = conn.CloseNow() }()
	topics := []string{"agent_control:" + a.env.AgentID, "agent_rooms:" + a.env.AgentID}
	a.mu.Lock()
	a.connected++
	again := a.connected > 1
	a.mu.Unlock()
	if a.fl.noControlTopic || (a.fl.controlOnce && again) {
		topics = topics[1:]
	}
	for i, topic := range topics {
		ref, _ := json.Marshal(i + 1)
		frame, _ := json.Marshal([]any{json.RawMessage(ref), json.RawMessage(ref), topic, "phx_join", map[string]any{}})
		if conn.Write(ctx, websocket.MessageText, frame) != nil {
			return false
		}
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return false
		}
		var f [5]json.RawMessage
		var event string
		if json.Unmarshal(data, &f) != nil || json.Unmarshal(f[3], &event) != nil {
			continue
		}
		switch event {
		case "agent.control":
			a.onControl(f[4])
		case "room_added":
			var p struct{ ID string }
			if json.Unmarshal(f[4], &p) == nil && p.ID != "" {
				a.addRoom(p.ID)
			}
		case "supersede":
			if !a.fl.ignoreSupersede {
				a.end(errSupersededLoop) // another connection took over: stop
			}
			return true
		}
	}
}

// onControl applies an interrupt, stop or play to the turns in flight.
func (a *sockAgent) onControl(payload json.RawMessage) {
	var c struct {
		Mode          string  `json:"mode"`
		RoomID        *string `json:"room_id"`
		CorrelationID string  `json:"correlation_id"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.CorrelationID != "" {
		if a.seen[c.CorrelationID] {
			return // Band does not deduplicate its pushes
		}
		a.seen[c.CorrelationID] = true
	}
	if a.fl.ignoreAgentWide && c.RoomID == nil {
		return
	}
	if a.fl.debounce {
		if last, ok := a.lastSignal[c.Mode]; ok && time.Since(last) < 5*time.Second {
			return // a repeat of the same button, it thought
		}
		if a.lastSignal == nil {
			a.lastSignal = map[string]time.Time{}
		}
		a.lastSignal[c.Mode] = time.Now()
	}
	for id, r := range a.rooms {
		if c.RoomID != nil && *c.RoomID != id {
			continue
		}
		switch c.Mode {
		case "play":
			r.stopped = false
			continue
		case "stop":
			r.stopped = true
			r.epoch++
		case "interrupt":
			if a.fl.skipAfterIdle && r.cur == nil {
				r.skipNext = true // the flaw: kept for a turn that has not begun
			}
		default:
			continue
		}
		if t := r.cur; t != nil {
			if t.committed {
				t.late = c.Mode
			} else if a.fl.ackBeforeCancel && c.Mode == "interrupt" && t.msg != "" {
				// The flaw: the message is consumed first, and the turn
				// only cancelled once the mark has gone.
				go func() {
					a.ack(a.life, t.room, t.msg)
					a.mu.Lock()
					defer a.mu.Unlock()
					t.abort = c.Mode
					if t.cancel != nil {
						t.cancel(errors.New(c.Mode))
					}
				}()
			} else {
				t.abort = c.Mode
				if t.cancel != nil {
					t.cancel(errors.New(c.Mode))
				}
			}
		}
	}
}

// arm opens the turn of a message /next served, unless a stop overtook
// the request; a message served to a request sent after the stop proves
// the room was played again.
func (a *sockAgent) arm(room string, epoch int) *sockTurn {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rooms[room]
	if r.stopped {
		if r.epoch != epoch {
			return nil
		}
		r.stopped = false
	}
	r.cur = &sockTurn{room: room}
	if r.skipNext {
		r.skipNext, r.cur.abort = false, "interrupt"
	}
	return r.cur
}

func (a *sockAgent) serving(t *sockTurn, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.msg = msg
}

func (a *sockAgent) disarm(room string, t *sockTurn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.rooms[room]; r.cur == t {
		r.cur = nil
	}
}

func (a *sockAgent) epoch(room string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rooms[room].epoch
}

// abortOf returns the signal that aborted the turn, if any.
func (a *sockAgent) abortOf(t *sockTurn) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return t.abort
}

// running installs the turn's cancel func, or cancels at once if a
// signal came first.
func (a *sockAgent) running(t *sockTurn, cancel context.CancelCauseFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.cancel = cancel
	if t.abort != "" {
		cancel(errors.New(t.abort))
	}
}

// commit fixes the turn's fate unless a signal aborted it.
func (a *sockAgent) commit(t *sockTurn) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.cancel = nil
	if t.abort == "" {
		t.committed = true
	}
	return t.abort
}

func (a *sockAgent) lateSignal(t *sockTurn) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return t.late
}

// serve handles the room's next message, if any; it reports whether there
// was one.
func (a *sockAgent) serve(ctx context.Context, room string) bool {
	epoch := a.epoch(room)
	m, err := a.c.Next(ctx, room)
	if err != nil || m == nil {
		return false
	}
	var t *sockTurn
	if !a.fl.armLate {
		if t = a.arm(room, epoch); t == nil {
			return false // stopped while /next was in flight: leave the message
		}
		a.serving(t, m.ID)
		defer a.disarm(room, t)
	}
	claim, err := a.c.Processing(ctx, room, m.ID)
	if err != nil {
		if t != nil && a.abortOf(t) == "interrupt" {
			a.consume(m.ID) // consume it when it comes back
		}
		return true
	}
	if a.fl.armLate {
		if t = a.arm(room, epoch); t == nil {
			return true
		}
		a.serving(t, m.ID)
		defer a.disarm(room, t)
	}
	if a.pending(m.ID) {
		a.ack(ctx, room, m.ID)
		return true
	}
	if abort := a.abortOf(t); abort != "" {
		a.endAborted(ctx, room, m.ID, abort)
		return true
	}
	x := a.env.External
	if x.Started(room, m.ID) != nil {
		return true
	}
	work, cancel := context.WithCancelCause(ctx)
	a.running(t, cancel)
	effectCtx := work
	if a.fl.effectUncancelled {
		effectCtx = ctx
	}
	if key := "notify:" + m.ID; x.Performed(key) == 0 {
		if err := x.Effect(effectCtx, key); err != nil {
			cancel(nil)
			if abort := a.abortOf(t); abort != "" {
				a.endAborted(ctx, room, m.ID, abort)
			} else if ctx.Err() == nil {
				_, _ = a.c.Failed(ctx, room, m.ID, err.Error())
			}
			return true
		}
	}
	cancel(nil)
	body := bandonce.StripMentions(m.Content)
	key := bandonce.DefaultKey(m.ID)
	if spec, err := proof.ParseSpec(body); err == nil && spec.Key != "" {
		key = spec.Key
	}
	content := "done: " + body + "\n[dedup_key:" + key + "]"
	switch fate := a.post(ctx, t, room, key, content, []wire.Mention{{ID: m.SenderID}}, claim.AttemptNumber > 1); fate {
	case "posted":
		a.ack(ctx, room, m.ID)
	case "interrupt", "stop":
		a.endAborted(ctx, room, m.ID, fate)
	}
	return true
}

// post sends the reply unless the guard finds it. The turn's fate is
// committed right before the first POST: a signal before that aborts it.
// After a failure it reads the room again, once that POST has settled,
// before another try, and sends nothing new once a signal came after the
// commit; a message served again (again) waits until an earlier life's
// POST has settled. It returns "posted", the signal that ended the turn,
// or "" (try again later).
func (a *sockAgent) post(ctx context.Context, t *sockTurn, room, key, content string, mentions []wire.Mention, again bool) string {
	if again {
		pause(ctx, time.Until(a.began.Add(settle)))
	}
	sent := false
	for try := 0; try < 4 && ctx.Err() == nil; try++ {
		found, err := a.guard(ctx, room, key)
		if err != nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		if found {
			return "posted"
		}
		if abort := a.commit(t); abort != "" {
			return abort
		}
		if late := a.lateSignal(t); sent && late != "" {
			return late // it did not land, and sending it now would be new output
		}
		sent = true
		if _, err := a.c.Post(ctx, room, content, mentions); err == nil {
			return "posted"
		}
		pause(ctx, settle) // it may still land: read only once it cannot
	}
	return ""
}

func (a *sockAgent) guard(ctx context.Context, room, key string) (bool, error) {
	cursor := ""
	for {
		page, err := a.c.Context(ctx, room, cursor, 0)
		if err != nil {
			return false, err
		}
		for _, it := range page.Items {
			if k, ok := oracle.MarkerKey(it.Content); ok && it.SenderID == a.me && k == key {
				return true, nil
			}
		}
		if !page.HasMore {
			return false, nil
		}
		cursor = page.NextCursor
	}
}

// endAborted ends an aborted turn: an interrupt consumes the message, a stop
// leaves it for replay.
func (a *sockAgent) endAborted(ctx context.Context, room, id, abort string) {
	if abort == "interrupt" && !a.fl.replayInterrupt {
		a.consume(id)
		a.ack(ctx, room, id)
	}
}

func (a *sockAgent) consume(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ackPending[id] = true
}

func (a *sockAgent) pending(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ackPending[id]
}

// ack marks the message processed; if that fails, only the mark is owed.
func (a *sockAgent) ack(ctx context.Context, room, id string) {
	a.consume(id)
	if _, err := a.c.Processed(ctx, room, id); err == nil {
		a.mu.Lock()
		delete(a.ackPending, id)
		a.mu.Unlock()
	}
}
