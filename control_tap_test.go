package bandonce_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/memnet"
	"github.com/band-once/bandonce/internal/phoenix"
)

// tap sits between a shell and the world's fake Band. It counts the
// shell's REST requests per room and endpoint (the fake only counts per
// endpoint), and it relays the Phoenix socket, so a test can see which
// topics the shell joins and push control frames the fake never sends:
// malformed payloads, unknown modes, agent-scope stops, replayed
// correlation ids, signals without the platform's gate behind them.
type tap struct {
	t    *testing.T
	w    *world
	rest http.RoundTripper

	mu       sync.Mutex
	requests map[tapKey]int
	served   map[string]int // per room: /next answers that carried a message
	joins    []string       // topics the shell joined, in order, over every connection
	live     *relay         // the shell's current connection, if any
	// onControlJoined runs on the relay right after the reply to the
	// shell's agent_control join has been passed on, before any other
	// frame from Band: a push it makes lands while the shell connects.
	onControlJoined func()
	// beforeJoin runs on the relay before a join of the shell's is passed
	// on to Band: what happens meanwhile happens before Band joins it.
	beforeJoin func(topic string)
}

// tapKey names one request class in one room ("next", "processing",
// "processed", "failed", "post", "context").
type tapKey struct{ endpoint, room string }

// relay is one socket connection of the shell, joined to Band's.
type relay struct {
	toShell    *websocket.Conn
	controlRef string // join_ref of the shell's agent_control join
}

func newTap(w *world) *tap {
	return &tap{t: w.t, w: w, rest: w.band.HTTPClient().Transport, requests: map[tapKey]int{}, served: map[string]int{}}
}

// config is the world's socket config with every request going through
// the tap.
func (tp *tap) config(h bandonce.Handler) bandonce.Config {
	cfg := tp.w.socketConfig(h)
	cfg.HTTPClient = &http.Client{Transport: tp}
	return cfg
}

// RoundTrip sends the socket upgrade to the relay and everything else to
// the fake, counted.
func (tp *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/socket/websocket") {
		return (&memnet.Transport{Handler: http.HandlerFunc(tp.serveSocket)}).RoundTrip(req)
	}
	k, ok := classify(req)
	if ok {
		tp.mu.Lock()
		tp.requests[k]++
		tp.mu.Unlock()
	}
	resp, err := tp.rest.RoundTrip(req)
	if ok && k.endpoint == "next" && err == nil && resp.StatusCode == http.StatusOK {
		tp.mu.Lock()
		tp.served[k.room]++
		tp.mu.Unlock()
	}
	return resp, err
}

// classify reads the endpoint and room of an agent request on a room.
func classify(req *http.Request) (tapKey, bool) {
	_, rest, ok := strings.Cut(req.URL.Path, "/agent/chats/")
	if !ok {
		return tapKey{}, false
	}
	parts := strings.Split(rest, "/")
	room := parts[0]
	switch {
	case len(parts) == 3 && parts[1] == "messages" && parts[2] == "next":
		return tapKey{"next", room}, true
	case len(parts) == 4 && parts[1] == "messages":
		return tapKey{parts[3], room}, true // processing, processed, failed
	case len(parts) == 2 && parts[1] == "messages" && req.Method == http.MethodPost:
		return tapKey{"post", room}, true
	case len(parts) == 2 && parts[1] == "context":
		return tapKey{"context", room}, true
	}
	return tapKey{}, false
}

// count is how many requests of the endpoint the shell made in the room.
func (tp *tap) count(endpoint, room string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.requests[tapKey{endpoint, room}]
}

// servedNext is how many of the room's /next answers carried a message.
func (tp *tap) servedNext(room string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.served[room]
}

// joined returns the topics the shell joined, in order.
func (tp *tap) joined() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.joins...)
}

// serveSocket accepts the shell's upgrade, dials Band's socket with the
// same key and query, and pumps frames both ways until either side ends.
func (tp *tap) serveSocket(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	toBand, resp, err := websocket.Dial(ctx, tp.w.band.SocketURL()+"?"+r.URL.RawQuery, &websocket.DialOptions{
		HTTPClient: tp.w.band.HTTPClient(),
		HTTPHeader: http.Header{"X-Api-Key": r.Header.Values("X-Api-Key")},
	})
	if err != nil {
		status := http.StatusBadGateway
		if resp != nil {
			status = resp.StatusCode
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
		}
		w.WriteHeader(status)
		return
	}
	toShell, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		_ = toBand.CloseNow()
		return
	}
	toBand.SetReadLimit(phoenix.MaxFrameSize)
	toShell.SetReadLimit(phoenix.MaxFrameSize)
	rl := &relay{toShell: toShell}
	tp.mu.Lock()
	tp.live = rl
	tp.mu.Unlock()

	var pumps sync.WaitGroup
	pumps.Add(1)
	go func() {
		defer pumps.Done()
		defer cancel()
		tp.pumpToShell(ctx, toBand, rl)
	}()
	tp.pumpToBand(ctx, toShell, toBand, rl)
	cancel()
	_ = toShell.CloseNow()
	_ = toBand.CloseNow()
	pumps.Wait()
	tp.mu.Lock()
	if tp.live == rl {
		tp.live = nil
	}
	tp.mu.Unlock()
}

// pumpToBand passes the shell's frames on, noting its joins.
func (tp *tap) pumpToBand(ctx context.Context, toShell, toBand *websocket.Conn, rl *relay) {
	for {
		typ, data, err := toShell.Read(ctx)
		if err != nil {
			return
		}
		if f, err := phoenix.Decode(data); err == nil && f.Event == phoenix.EventJoin {
			tp.mu.Lock()
			tp.joins = append(tp.joins, f.Topic)
			if strings.HasPrefix(f.Topic, "agent_control:") {
				rl.controlRef = f.JoinRef
			}
			hook := tp.beforeJoin
			tp.mu.Unlock()
			if hook != nil {
				hook(f.Topic)
			}
		}
		if toBand.Write(ctx, typ, data) != nil {
			return
		}
	}
}

// pumpToShell passes Band's frames on and runs onControlJoined after the
// control join's reply.
func (tp *tap) pumpToShell(ctx context.Context, toBand *websocket.Conn, rl *relay) {
	for {
		typ, data, err := toBand.Read(ctx)
		if err != nil {
			return
		}
		if rl.toShell.Write(ctx, typ, data) != nil {
			return
		}
		f, err := phoenix.Decode(data)
		if err != nil || f.Event != phoenix.EventReply || !strings.HasPrefix(f.Topic, "agent_control:") {
			continue
		}
		tp.mu.Lock()
		hook := tp.onControlJoined
		tp.mu.Unlock()
		if hook != nil {
			hook()
		}
	}
}

// errNoSocket: a push was asked for while the shell had no joined socket.
var errNoSocket = errors.New("tap: the shell has no socket joined to agent_control")

// pushRaw sends one frame on the shell's agent_control topic, exactly as
// given, as if Band had pushed it.
func (tp *tap) pushRaw(event, payload string) error {
	tp.mu.Lock()
	rl := tp.live
	tp.mu.Unlock()
	if rl == nil || rl.controlRef == "" {
		return errNoSocket
	}
	frame, err := phoenix.Encode(phoenix.Frame{
		JoinRef: rl.controlRef, Topic: "agent_control:" + tp.w.agent.ID,
		Event: event, Payload: json.RawMessage(payload),
	})
	if err != nil {
		return err
	}
	return rl.toShell.Write(context.Background(), websocket.MessageText, frame)
}

// signal pushes an agent.control for this world's agent. Fields left
// empty are left out of the payload; it waits until the shell has acted.
func (tp *tap) signal(mode, scope, roomID, correlationID string) {
	tp.t.Helper()
	p := map[string]any{"type": "agent.control", "mode": mode, "scope": scope, "agent_id": tp.w.agent.ID, "reason": "user_requested"}
	if roomID != "" {
		p["room_id"] = roomID
	}
	if correlationID != "" {
		p["correlation_id"] = correlationID
	}
	raw, err := json.Marshal(p)
	require.NoError(tp.t, err)
	require.NoError(tp.t, tp.pushRaw("agent.control", string(raw)))
	synctest.Wait()
}
