package proof

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/internal/phoenix"
)

// This file is a hand-made agent over the REST API, with no Shell: a loop
// that is correct by default and can be broken on purpose, one defect at a
// time, so the self-tests can show the prover catches each defect.

// defects switch one mistake on in the hand-made agent.
type defects struct {
	guardDisabled   bool // never reads the room before posting
	ackBeforePost   bool // marks processed, then posts
	blindResend     bool // re-sends a failed POST at once, without reading the room
	onePageGuard    bool // reads only the first page of /context
	ignoreInterrupt bool // listens for control signals but ignores interrupts
	ignoreStop      bool // listens for control signals but ignores stops
	ignoreSupersede bool // hears supersede and carries on (its socket reconnects)
	replayInterrupt bool // an interrupted cycle is left for replay, not consumed
	resendOn5xx     bool // a POST answered 5xx is sent again without reading the room
	readUnsettled   bool // reads the room for a POST of unknown outcome before it has settled
}

// contextPage is the page size the hand-made guard asks for; small, so a
// handful of messages spans several pages.
const contextPage = 4

// loopTimeout is the hand-made loop's request timeout, and loopSettle its
// settle window: how long after a POST was written Band may still apply
// it (the bound the prover's Band keeps, lateBound, twice the timeout, as
// Config.SettleWindow's default is).
const (
	loopTimeout = 2 * time.Second
	loopSettle  = lateBound
)

// restAgent builds the hand-made agent with the given defects.
func restAgent(d defects) func(*Schedule) (Factory, func()) {
	return func(*Schedule) (Factory, func()) {
		return func() Agent {
			return func(ctx context.Context, env Env) error {
				a := &loopAgent{d: d, api: &restClient{hc: env.HTTPClient, base: env.BaseURL, key: env.APIKey}, env: env,
					abort: map[string]string{}, active: map[string]bool{}, ackPending: map[string]bool{},
					born: time.Now(), unsure: map[string]time.Time{}, inherited: map[string]bool{}}
				return a.run(ctx)
			}
		}, nil
	}
}

type loopAgent struct {
	d   defects
	api *restClient
	env Env

	mu         sync.Mutex
	abort      map[string]string // room -> "interrupt" or "stop" for the cycle in flight
	active     map[string]bool   // room -> a cycle is between dequeue and its fate
	ackPending map[string]bool   // message -> only the processed mark is owed
	superseded context.CancelFunc
	// born is when this life began: a POST an earlier life sent, whose
	// outcome this life cannot know, may land until loopSettle after it.
	born time.Time
	// unsure: message -> when this life last wrote a POST for it whose
	// outcome is unknown (a timeout, a reset, a 5xx).
	unsure map[string]time.Time
	// inherited: message -> an earlier life may have attempted it (this
	// life's first processing mark of it was not Band's first attempt).
	inherited map[string]bool
}

func (a *loopAgent) run(ctx context.Context) error {
	ctx, a.superseded = context.WithCancel(ctx)
	defer a.superseded()
	var rooms []string
	for ctx.Err() == nil {
		var err error
		if rooms, err = a.api.rooms(ctx); err == nil {
			break
		}
		pause(ctx, 50*time.Millisecond)
	}
	sock := phoenix.New(phoenix.Config{URL: a.env.SocketURL, APIKey: a.env.APIKey, AgentID: a.env.AgentID, HTTPClient: a.env.HTTPClient, Seed: a.env.Seed})
	sock.Join("agent_control:"+a.env.AgentID, a.onControl)
	var wg sync.WaitGroup
	wg.Go(func() { _ = sock.Run(ctx) })
	defer wg.Wait()
	for ctx.Err() == nil {
		for _, room := range rooms {
			a.cycle(ctx, room)
		}
		pause(ctx, 100*time.Millisecond)
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// onControl records an interrupt or stop for the room's cycle in flight;
// with no cycle in flight there is nothing to abort.
func (a *loopAgent) onControl(event string, payload json.RawMessage) {
	var c struct {
		Mode   string  `json:"mode"`
		RoomID *string `json:"room_id"`
	}
	if event == "supersede" && !a.d.ignoreSupersede {
		a.superseded() // another connection took over: stop
		return
	}
	if event != "agent.control" || json.Unmarshal(payload, &c) != nil {
		return
	}
	if (c.Mode == "interrupt" && a.d.ignoreInterrupt) || (c.Mode == "stop" && a.d.ignoreStop) || c.Mode == "play" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for room, active := range a.active {
		if active && (c.RoomID == nil || *c.RoomID == room) {
			a.abort[room] = c.Mode
		}
	}
}

func (a *loopAgent) aborted(room string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.abort[room]
}

func (a *loopAgent) arm(room string, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active[room] = on
	delete(a.abort, room)
}

// cycle handles at most one message of the room.
func (a *loopAgent) cycle(ctx context.Context, room string) {
	m, err := a.api.next(ctx, room)
	if err != nil || m == nil || m.SenderID == a.env.AgentID {
		return
	}
	a.arm(room, true)
	defer a.arm(room, false)
	n, err := a.api.processing(ctx, room, m.ID)
	if err != nil {
		return // a stale serve (422) or a failure: /next will tell again
	}
	if _, seen := a.inherited[m.ID]; !seen {
		a.inherited[m.ID] = n > 1
	}
	if a.ackPending[m.ID] {
		a.ack(ctx, room, m.ID)
		return
	}
	if a.aborted(room) != "" {
		a.endAborted(ctx, room, m.ID)
		return
	}
	if _, err := a.env.External.Started(room, m.ID); err != nil {
		return
	}
	spec, _ := ParseSpec(bandonce.StripMentions(m.Content))
	key := bandonce.DefaultKey(m.ID)
	content := "done: " + spec.Label + "\n[dedup_key:" + key + "]"
	if a.d.ackBeforePost && !a.ack(ctx, room, m.ID) {
		return
	}
	for try := 0; ; try++ {
		if a.aborted(room) != "" {
			a.endAborted(ctx, room, m.ID)
			return
		}
		// A blind re-send skips the read that would find the first POST.
		if !a.d.guardDisabled && !(a.d.blindResend && try > 0) {
			if !a.settled(ctx, m.ID) {
				return // killed or superseded while waiting
			}
			if a.aborted(room) != "" { // a signal that came during the wait
				a.endAborted(ctx, room, m.ID)
				return
			}
			found, err := a.api.hasKey(ctx, room, a.env.AgentID, key, a.d.onePageGuard)
			if err != nil {
				return
			}
			if found {
				break
			}
		}
		if a.aborted(room) != "" { // a signal that came during the read
			a.endAborted(ctx, room, m.ID)
			return
		}
		err := a.post(ctx, room, m.ID, content, m.SenderID)
		if err == nil {
			break
		}
		var apiErr *apiError
		if (errors.As(err, &apiErr) && apiErr.status == http.StatusForbidden) || try == 2 {
			return // stopped, or giving up for now: /next serves it again
		}
		if a.d.resendOn5xx && errors.As(err, &apiErr) && apiErr.status >= 500 {
			// "The server said it failed": sent again without a read.
			if a.post(ctx, room, m.ID, content, m.SenderID) == nil {
				break
			}
		}
	}
	if !a.d.ackBeforePost {
		a.ack(ctx, room, m.ID)
	}
}

// post sends the reply to message id, and notes when a POST whose outcome
// is unknown was written: anything but an answer below 500 may still be
// applied, up to loopSettle after it left.
func (a *loopAgent) post(ctx context.Context, room, id, content, mention string) error {
	sent := time.Now()
	err := a.api.post(ctx, room, content, mention)
	var apiErr *apiError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.status < 500) {
		a.unsure[id] = sent
	}
	return err
}

// settled waits until a read of the room can find every POST for message
// id that may still land: loopSettle after this life's last POST of
// unknown outcome for it, and after this life began, for an earlier
// life's, if one may have attempted it. It reports false if ctx ended
// first.
func (a *loopAgent) settled(ctx context.Context, id string) bool {
	if a.d.readUnsettled {
		return ctx.Err() == nil
	}
	var until time.Time
	if a.inherited[id] {
		until = a.born.Add(loopSettle)
	}
	if t, ok := a.unsure[id]; ok && t.Add(loopSettle).After(until) {
		until = t.Add(loopSettle)
	}
	if d := time.Until(until); d > 0 {
		pause(ctx, d)
	}
	return ctx.Err() == nil
}

// endAborted ends an aborted cycle: an interrupt consumes the message,
// a stop leaves it for replay.
func (a *loopAgent) endAborted(ctx context.Context, room, id string) {
	if a.aborted(room) == "interrupt" && !a.d.replayInterrupt {
		a.ack(ctx, room, id)
	}
}

// ack marks the message processed; if that fails, only the mark is owed.
func (a *loopAgent) ack(ctx context.Context, room, id string) bool {
	if _, err := a.api.mark(ctx, room, id, "processed", nil); err != nil {
		a.ackPending[id] = true
		return false
	}
	delete(a.ackPending, id)
	return true
}

// restClient is a tiny client for the agent REST API.
type restClient struct {
	hc        *http.Client
	base, key string
}

type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

type wireMessage struct {
	ID         string `json:"id"`
	Content    string `json:"content"`
	SenderID   string `json:"sender_id"`
	SenderType string `json:"sender_type"`
}

// do sends one request; a 429 (which Band answers before applying
// anything) is waited out, for its Retry-After or a short pause, and sent
// again, a few times: a loop that re-sent at once would starve behind a
// throttle.
func (c *restClient) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	for try := 1; ; try++ {
		status, retryAfter, err := c.once(ctx, method, path, data, out)
		if status != http.StatusTooManyRequests || try == 5 {
			return status, err
		}
		pause(ctx, max(retryAfter, time.Duration(try)*100*time.Millisecond))
	}
}

func (c *restClient) once(ctx context.Context, method, path string, body []byte, out any) (int, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(ctx, loopTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-API-Key", c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var retryAfter time.Duration
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retryAfter = time.Duration(secs) * time.Second
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, retryAfter, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, retryAfter, &apiError{resp.StatusCode, string(data)}
	}
	if out != nil && len(data) > 0 {
		return resp.StatusCode, retryAfter, json.Unmarshal(data, out)
	}
	return resp.StatusCode, retryAfter, nil
}

func (c *restClient) rooms(ctx context.Context) ([]string, error) {
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/agent/chats?page_size=100", nil, &out); err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range out.Data {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

func (c *restClient) next(ctx context.Context, room string) (*wireMessage, error) {
	var out struct {
		Data wireMessage `json:"data"`
	}
	status, err := c.do(ctx, http.MethodGet, "/agent/chats/"+room+"/messages/next", nil, &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &out.Data, nil
}

func (c *restClient) mark(ctx context.Context, room, id, kind string, body any) (int, error) {
	return c.do(ctx, http.MethodPost, "/agent/chats/"+room+"/messages/"+id+"/"+kind, body, nil)
}

// processing opens an attempt of message id and returns its number.
func (c *restClient) processing(ctx context.Context, room, id string) (int, error) {
	var out struct {
		Data struct {
			AttemptNumber int `json:"attempt_number"`
		} `json:"data"`
	}
	_, err := c.do(ctx, http.MethodPost, "/agent/chats/"+room+"/messages/"+id+"/processing", nil, &out)
	return out.Data.AttemptNumber, err
}

func (c *restClient) post(ctx context.Context, room, content, mention string) error {
	body := map[string]any{"message": map[string]any{"content": content, "mentions": []map[string]string{{"id": mention}}}}
	_, err := c.do(ctx, http.MethodPost, "/agent/chats/"+room+"/messages", body, nil)
	return err
}

// hasKey reads the room's context, every page (or only the first), for
// a reply of self carrying key's marker.
func (c *restClient) hasKey(ctx context.Context, room, self, key string, onePage bool) (bool, error) {
	cursor := ""
	for {
		q := url.Values{"limit": {fmt.Sprint(contextPage)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var out struct {
			Data     []wireMessage `json:"data"`
			Metadata struct {
				NextCursor *string `json:"next_cursor"`
				HasMore    bool    `json:"has_more"`
			} `json:"metadata"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/agent/chats/"+room+"/context?"+q.Encode(), nil, &out); err != nil {
			return false, err
		}
		for _, m := range out.Data {
			if k, ok := oracle.MarkerKey(m.Content); ok && k == key && m.SenderID == self {
				return true, nil
			}
		}
		if onePage || !out.Metadata.HasMore || out.Metadata.NextCursor == nil {
			return false, nil
		}
		cursor = *out.Metadata.NextCursor
	}
}

// consumeSilently marks every message processed without a reply: an
// agent that never answers.
func (a *loopAgent) consumeSilently(ctx context.Context) error {
	rooms, _ := a.api.rooms(ctx)
	for ctx.Err() == nil {
		for _, room := range rooms {
			if m, err := a.api.next(ctx, room); err == nil && m != nil {
				if _, err := a.api.mark(ctx, room, m.ID, "processing", nil); err == nil {
					a.ack(ctx, room, m.ID)
				}
			}
		}
		pause(ctx, 100*time.Millisecond)
	}
	return nil
}
