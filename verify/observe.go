package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// observation is what the verifier saw of one run of a schedule from the
// agent's side of the wire: every request it made, the key of every reply
// it sent, and what its handlers and the external system went through. The
// engine's oracle judges the fake's ground truth; these records let the
// verifier name the defect behind a violation.
type observation struct {
	// durable: the Shell adapter's lives share ledger, the schedule's own
	// (DurableLedger); it is made by the first life that asks.
	durable bool
	ledger  bandonce.Ledger

	world *world

	mu sync.Mutex
	// completed counts the requests that returned to the agent.
	completed int
	// open is, per life and room, the message whose attempt the agent
	// opened last: a reply sent in that room answers it.
	open map[lifeRoom]string
	// keys lists, per message, the distinct reply keys the agent sent for
	// it, in order.
	keys map[string][]string
	// keyLife is the life that first sent each key of a message.
	keyLife map[string]map[string]int
	// repliedOK is, per life, the messages whose reply POST that life saw
	// succeed.
	repliedOK map[lifeMessage]bool
	// sightings are the replies each life saw posted and the failed marks
	// it sent, in order, for oracle.FailedAfterReply.
	sightings []oracle.Sighting
	// rejections are the posts Band refused (see rejected.go).
	rejections []rejection
	// handlers are the Shell adapter's handler calls.
	handlers []*handlerCall
	// afterReturn lists the requests lives sent after their agent
	// function returned.
	afterReturn []afterReturn
	// instances are the supersede check's instances, by life.
	supersede *supersedeRecord
	// labels names messages by the label their text starts with ("r1m2"),
	// as the agent read them from /next.
	labels map[string]string
	// notes are remarks on what could not be exercised.
	notes map[string]bool
	// turns are the deliveries the agent worked on (see turn); tick reads
	// the engine's order clock, from the first life on.
	turns []*turn
	tick  func() int64
	// rooms are the rooms the agent sent a request about.
	rooms map[string]bool

	// running holds the context of each handler call in progress under
	// the Shell adapter, by life and message: a message or event sent
	// while it runs is one of the turn's effects, not its reply.
	running map[lifeMessage]context.Context
	// delivery numbers the attempts the agent opened, per life and room.
	delivery   map[lifeRoom]int
	deliveries int
	// effects are the turns' messages and events, in the order sent;
	// effectKeys their keys.
	effects    []effectSend
	effectKeys map[string]bool
	// replies are the Replies the Shell adapter's handlers returned;
	// lookups the keys their turns' Sends and Events looked up.
	replies, lookups []sent
	// servedAt are the ticks at which /next served each message to a
	// life, and askedAt the ticks at which the /next requests that served
	// it were sent.
	servedAt, askedAt map[lifeMessage][]int64
	// ackedAt and postedAt are the ticks at which each life sent each
	// message's processed mark and its reply.
	ackedAt, postedAt map[lifeMessage][]int64
	// sockets are the agent's socket connections, watched.
	sockets []*socketConn
	// bandEffects are the turns' writes to Band besides posts (see
	// bandEffectKinds).
	bandEffects []*bandEffect
	// stepWrites counts the step results each life's ledger recorded;
	// steps are the runs of steps' fns.
	stepWrites map[stepRecord]int
	steps      []*stepSpan
}

type lifeRoom struct {
	life int
	room string
}

type lifeMessage struct {
	life int
	msg  string
}

// handlerCall is one call of a handler under the Shell adapter.
type handlerCall struct {
	life      int
	room, msg string
	start     time.Time
	// cancelled is when its context ended (zero while it lives), and why.
	cancelled time.Time
	cause     error
	returned  bool
	// end is when it returned.
	end time.Time
	// turn is the call's turn, whose requests the recorder times.
	turn *turn
}

// span is when one of a turn's requests to Band was in flight; end is
// zero until it returned.
type span struct{ start, end time.Time }

// waitedAfter is how long after t the call still waited on one of its
// turn's requests that was in flight at t, up to until: the Shell lets
// the requests of a send, an event or an agent-API write that left end
// (a POST cannot be taken back, and the guard's read before it must learn
// what the room holds). Caller holds o.mu.
func (h *handlerCall) waitedAfter(t, until time.Time) time.Duration {
	if h.turn == nil {
		return 0
	}
	var waited time.Duration
	for _, sp := range h.turn.inFlight {
		end := sp.end
		if end.IsZero() || end.After(until) {
			end = until
		}
		if !sp.start.After(t) && end.After(t) {
			waited = max(waited, end.Sub(t))
		}
	}
	return waited
}

func newObservation(plan externalPlan) *observation {
	o := &observation{
		open: map[lifeRoom]string{}, keys: map[string][]string{}, keyLife: map[string]map[string]int{},
		repliedOK: map[lifeMessage]bool{}, labels: map[string]string{}, notes: map[string]bool{}, rooms: map[string]bool{},
		running: map[lifeMessage]context.Context{}, delivery: map[lifeRoom]int{},
		effectKeys: map[string]bool{}, stepWrites: map[stepRecord]int{}, servedAt: map[lifeMessage][]int64{}, askedAt: map[lifeMessage][]int64{},
		ackedAt: map[lifeMessage][]int64{}, postedAt: map[lifeMessage][]int64{},
	}
	o.world = newWorld(plan, o.requestsCompleted)
	o.world.tick = o.ticker
	return o
}

// scheduleLedger returns the ledger the schedule's lives share, made on
// the first call.
func (o *observation) scheduleLedger() bandonce.Ledger {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ledger == nil {
		o.ledger = durableMemory{bandonce.NewMemoryLedger()}
		o.notes[scheduleLedgerNote] = true
	}
	return o.ledger
}

// durableMemory is a MemoryLedger that outlives the schedule's lives, so
// it says it is durable, as the store it stands in for is.
type durableMemory struct{ *bandonce.MemoryLedger }

func (durableMemory) Durable() bool { return true }

// scheduleLedgerNote says what DurableLedger shares.
const scheduleLedgerNote = "DurableLedger: every life of a schedule shared one in-process ledger, as a durable Ledger outlives a crash; a kill here lost none of its records"

func (o *observation) requestsCompleted() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.completed
}

// keyOf is the oracle's dedup key for a message: the first key the agent
// sent for it, else the spec's natural key, else the library's default.
func (o *observation) keyOf(messageID string, spec proof.MessageSpec) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ks := o.keys[messageID]; len(ks) > 0 {
		return ks[0]
	}
	if spec.Key != "" {
		return spec.Key
	}
	return "msg:" + messageID
}

// env builds the Env one life of the agent gets: the engine's client
// behind the verifier's recorder, and an External bound to the life.
func (o *observation) env(ctx context.Context, pe proof.Env) Env {
	o.mu.Lock()
	if o.tick == nil {
		o.tick = pe.External.Tick
	}
	o.mu.Unlock()
	return Env{
		HTTPClient: &http.Client{Transport: &recorder{o: o, life: pe.Life, inner: pe.HTTPClient.Transport, agentID: pe.AgentID}},
		BaseURL:    pe.BaseURL,
		SocketURL:  pe.SocketURL,
		APIKey:     pe.APIKey,
		AgentID:    pe.AgentID,
		External:   &External{world: o.world, obs: o, life: pe.Life, ctx: ctx, inner: pe.External},
		Life:       pe.Life,
		Seed:       pe.Seed,
	}
}

// recorder is the RoundTripper between the agent and the engine's gate.
type recorder struct {
	o     *observation
	life  int
	inner http.RoundTripper
	// onSocket, if set, wraps every socket the agent opens.
	onSocket func(io.ReadWriteCloser) io.ReadWriteCloser
	// onRequest, if set, sees every request before it is sent.
	onRequest func(ep fakeband.Endpoint)
	// agentID is the agent's; conns counts its socket connections.
	agentID string
	conns   int
	// returned: the agent function of this life has returned; a request
	// it sends after that comes from work it left running.
	returned atomic.Bool
}

// afterReturn is a request a life sent after its agent function returned.
type afterReturn struct {
	life int
	ep   fakeband.Endpoint
}

// markReturned records that the agent function that got env returned.
func markReturned(env Env) {
	if r, ok := env.HTTPClient.Transport.(*recorder); ok {
		r.returned.Store(true)
	}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ep, room, msg := classify(req.Method, req.URL.Path)
	if r.returned.Load() {
		r.o.mu.Lock()
		r.o.afterReturn = append(r.o.afterReturn, afterReturn{life: r.life, ep: ep})
		r.o.mu.Unlock()
	}
	if r.onRequest != nil {
		r.onRequest(ep)
	}
	o := r.o
	if room != "" {
		o.mu.Lock()
		o.rooms[room] = true
		o.mu.Unlock()
	}
	switch ep {
	case fakeband.EndpointProcessed:
		o.closeLoopTurns(r.life, msg)
		tick := o.ticker()
		o.mu.Lock()
		o.ackedAt[lifeMessage{r.life, msg}] = append(o.ackedAt[lifeMessage{r.life, msg}], tick)
		o.mu.Unlock()
	case fakeband.EndpointProcessing:
		o.mu.Lock()
		o.open[lifeRoom{r.life, room}] = msg
		o.deliveries++
		o.delivery[lifeRoom{r.life, room}] = o.deliveries
		o.mu.Unlock()
	case fakeband.EndpointPost:
		if r.noteEffect(req, room, false) {
			break // sent while the handler ran: not the reply
		}
		msg = r.notePost(req, room)
		if msg != "" {
			tick := o.ticker()
			o.mu.Lock()
			o.postedAt[lifeMessage{r.life, msg}] = append(o.postedAt[lifeMessage{r.life, msg}], tick)
			o.mu.Unlock()
		}
	case endpointEvent:
		r.noteEffect(req, room, true)
	case fakeband.EndpointFailed:
		o.closeLoopTurns(r.life, msg)
		o.mu.Lock()
		o.sightings = append(o.sightings, oracle.Sighting{Life: r.life, Msg: msg, Failed: true})
		o.mu.Unlock()
	}
	var inFlight *span
	if x := ExternalFrom(req.Context()); x != nil && x.turn != nil {
		o.mu.Lock()
		if req.Method == http.MethodGet {
			x.turn.asked = true
		}
		inFlight = &span{start: time.Now()}
		x.turn.inFlight = append(x.turn.inFlight, inFlight)
		o.mu.Unlock()
	}
	be := r.noteBandEffect(req)
	var asked int64
	if ep == fakeband.EndpointNext {
		asked = o.ticker()
	}
	resp, err := r.inner.RoundTrip(req)
	r.noteRejection(req, room, resp, err)
	o.mu.Lock()
	if inFlight != nil {
		inFlight.end = time.Now()
	}
	o.completed++
	if be != nil && err == nil && resp.StatusCode/100 == 2 {
		be.landed = true
	}
	if ep == fakeband.EndpointPost && msg != "" && err == nil && resp.StatusCode/100 == 2 {
		o.repliedOK[lifeMessage{r.life, msg}] = true
		o.sightings = append(o.sightings, oracle.Sighting{Life: r.life, Msg: msg, Replied: true})
	}
	o.mu.Unlock()
	if ep == fakeband.EndpointNext && err == nil && resp.StatusCode == http.StatusOK {
		r.noteServed(resp, asked)
	}
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			rwc = r.watchSocket(rwc, r.agentID)
			if r.onSocket != nil {
				rwc = r.onSocket(rwc)
			}
			resp.Body = rwc
		}
	}
	return resp, err
}

// noteServed learns the label of a message /next served, leaving the
// body for the agent.
func (r *recorder) noteServed(resp *http.Response, asked int64) {
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return
	}
	var body struct {
		Data struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &body) != nil || body.Data.ID == "" {
		return
	}
	fields := strings.Fields(bandonce.StripMentions(body.Data.Content))
	if len(fields) == 0 {
		return
	}
	tick := r.o.ticker()
	r.o.mu.Lock()
	r.o.labels[body.Data.ID] = fields[0]
	lm := lifeMessage{r.life, body.Data.ID}
	r.o.servedAt[lm] = append(r.o.servedAt[lm], tick)
	r.o.askedAt[lm] = append(r.o.askedAt[lm], asked)
	r.o.mu.Unlock()
}

// label names a message for reports: its label, or its id.
func (o *observation) label(id string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l := o.labels[id]; l != "" {
		return l
	}
	return id
}

// notePost records the key of a reply and the message it answers, and
// returns that message's id ("" when no attempt is open in the room).
func (r *recorder) notePost(req *http.Request, room string) string {
	key, ok := replyKey(req)
	o := r.o
	o.mu.Lock()
	defer o.mu.Unlock()
	msg := o.open[lifeRoom{r.life, room}]
	if msg == "" {
		return ""
	}
	if !ok {
		key = ""
	}
	o.noteKeyLocked(msg, key, r.life)
	return msg
}

// noteKeyLocked records that life chose key for msg's reply.
func (o *observation) noteKeyLocked(msg, key string, life int) {
	ks := o.keys[msg]
	for _, k := range ks {
		if k == key {
			return
		}
	}
	o.keys[msg] = append(ks, key)
	if o.keyLife[msg] == nil {
		o.keyLife[msg] = map[string]int{}
	}
	o.keyLife[msg][key] = life
}

// classify names a request's endpoint, room and message from its path.
func classify(method, path string) (ep fakeband.Endpoint, room, msg string) {
	_, rest, ok := strings.Cut(path, fakeband.APIPrefix+"/")
	if !ok {
		return "", "", ""
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if rest == "socket/websocket" {
		return fakeband.EndpointSocket, "", ""
	}
	if len(parts) < 4 || parts[0] != "agent" || parts[1] != "chats" {
		return "", "", ""
	}
	room = parts[2]
	switch {
	case len(parts) == 4 && parts[3] == "context":
		return fakeband.EndpointContext, room, ""
	case len(parts) == 4 && parts[3] == "messages" && method == http.MethodPost:
		return fakeband.EndpointPost, room, ""
	case eventPath(method, parts):
		return endpointEvent, room, ""
	case len(parts) == 5 && parts[4] == "next":
		return fakeband.EndpointNext, room, ""
	case len(parts) == 6 && parts[3] == "messages":
		return fakeband.Endpoint(parts[5]), room, parts[4]
	}
	return "", room, ""
}

// replyKey reads the dedup marker of a reply POST, leaving its body for
// the next reader. The verifier reads the marker itself, as Band's
// convention writes it: the last line, [dedup_key:KEY].
func replyKey(req *http.Request) (string, bool) {
	if req.Body == nil {
		return "", false
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	if err != nil {
		return "", false
	}
	var body struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "", false
	}
	return oracle.MarkerKey(body.Message.Content)
}
