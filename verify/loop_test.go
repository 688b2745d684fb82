package verify

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/internal/wire"
	"github.com/band-once/bandonce/proof"
)

// loopFlaws are band-once 0.1's defects, each a switch of the hand-written
// loop below. The zero value is a correct loop.
type loopFlaws struct {
	onePageGuard   bool // the guard reads only the first page of /context
	substringGuard bool // the guard looks for the key anywhere in the page's text
	blindRetry     bool // a POST that failed is sent again, unguarded
	stallOnFailed  bool // a message served again after failed counts as handled
	failAfterAck   bool // a failed processed mark becomes a failed mark
	ackBeforePost  bool // the message is marked processed before its reply is posted

	// Defects the widened fault model catches.
	anySenderGuard  bool // the guard takes a [dedup_key:...] line from anyone for the agent's reply
	resendOn5xx     bool // a POST answered 5xx is sent again at once: "the server said it failed"
	resendOnTimeout bool // a POST the client timed out on is sent again at once: "it never got there"
	listRoomsOnce   bool // the rooms are listed at start only: a room joined later is never served
	noPause         bool // an idle loop asks /next again at once, never waiting on a timer
	noSettle        bool // a read that does not find the reply is trusted at once, though a POST may still land
	noGuard         bool // the reply is posted without reading the room: band-once 0.1's starting point

	// think is how long the turn takes between its effect and its reply
	// (a model's answer): not a defect.
	think time.Duration
}

// requestTimeout bounds each of the loop's requests, as any client should.
const requestTimeout = 2 * time.Second

// settle is how long after it was sent a POST may still land (twice the
// request timeout, as the Shell assumes), and a little more: a read that
// does not find the reply proves nothing before.
const settle = 2*requestTimeout + 100*time.Millisecond

// sendOnce is a wire.Doer that sends every request once.
type sendOnce struct{ hc *http.Client }

func (d sendOnce) Do(req *http.Request, _ string, _ bool) (*http.Response, error) {
	return d.hc.Do(req)
}

// handLoop is an agent with its own loop over Band's REST API, without the
// Shell and without a socket: it polls every room's /next, marks, runs its
// handler (one idempotent external effect), guards and posts its reply,
// and marks the message processed.
func handLoop(fl loopFlaws) Factory {
	return func() Agent {
		return func(ctx context.Context, env Env) error {
			hc := &http.Client{Transport: env.HTTPClient.Transport, Timeout: requestTimeout}
			l := &loop{fl: fl, env: env, c: wire.NewClient(env.BaseURL, env.APIKey, sendOnce{hc}), handled: map[string]bool{}}
			return l.run(ctx)
		}
	}
}

type loop struct {
	fl      loopFlaws
	env     Env
	c       *wire.Client
	me      string
	handled map[string]bool
	began   time.Time // this life's start: an earlier life's POST may land until began+settle
}

func (l *loop) run(ctx context.Context) error {
	l.began = time.Now()
	var rooms []string
	for ctx.Err() == nil && rooms == nil {
		me, err := l.c.Me(ctx)
		if err == nil {
			l.me = me.ID
			if rooms, err = l.rooms(ctx); err == nil {
				break
			}
		}
		pause(ctx, 100*time.Millisecond)
	}
	for idle := 0; ctx.Err() == nil; {
		busy := false
		for _, room := range rooms {
			busy = l.serve(ctx, room) || busy
		}
		if busy || l.fl.noPause {
			continue
		}
		pause(ctx, 200*time.Millisecond)
		// Now and then the rooms are listed again: the agent may have
		// been added to one, and there is no socket to say so.
		if idle++; idle%5 == 0 && !l.fl.listRoomsOnce {
			if again, err := l.rooms(ctx); err == nil {
				rooms = again
			}
		}
	}
	return nil
}

func (l *loop) rooms(ctx context.Context) ([]string, error) {
	chats, err := l.c.Chats(ctx)
	if err != nil {
		return nil, err
	}
	rooms := []string{}
	for _, ch := range chats {
		rooms = append(rooms, ch.ID)
	}
	return rooms, nil
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// serve handles the room's next message, if any; it reports whether there
// was one.
func (l *loop) serve(ctx context.Context, room string) bool {
	m, err := l.c.Next(ctx, room)
	if err != nil || m == nil {
		return false
	}
	if l.fl.stallOnFailed && l.handled[m.ID] {
		return false // "nothing to do": it was handled (and failed) before
	}
	claim, err := l.c.Processing(ctx, room, m.ID)
	if err != nil {
		return false
	}
	body := bandonce.StripMentions(m.Content)
	key := bandonce.DefaultKey(m.ID)
	if spec, err := proof.ParseSpec(body); err == nil && spec.Key != "" {
		key = spec.Key
	}
	x := l.env.External
	_ = x.Started(room, m.ID)
	if effect := "notify:" + m.ID; x.Performed(effect) == 0 {
		if err := x.Effect(ctx, effect); err != nil {
			if ctx.Err() == nil {
				_, _ = l.c.Failed(ctx, room, m.ID, err.Error())
				l.handled[m.ID] = true
			}
			return true
		}
	}
	pause(ctx, l.fl.think)
	content := "done: " + body + "\n[dedup_key:" + key + "]"
	mentions := []wire.Mention{{ID: m.SenderID}}
	if l.fl.ackBeforePost {
		if _, err := l.c.Processed(ctx, room, m.ID); err != nil {
			return true
		}
		_, _ = l.c.Post(ctx, room, content, mentions)
		l.handled[m.ID] = true
		return true
	}
	if !l.post(ctx, room, key, content, mentions, claim.AttemptNumber > 1) {
		return true
	}
	for try := 0; ; try++ {
		_, err := l.c.Processed(ctx, room, m.ID)
		if err == nil {
			break
		}
		if l.fl.failAfterAck {
			_, _ = l.c.Failed(ctx, room, m.ID, "processed failed: "+err.Error())
			break
		}
		if try == 3 || ctx.Err() != nil {
			return true // Band serves it again; the guard will find the reply
		}
		pause(ctx, 50*time.Millisecond)
	}
	l.handled[m.ID] = true
	return true
}

// post sends the reply unless the guard finds it; after an ambiguous
// failure it reads the room again, once that POST has settled, before
// another try; a message served again (again) may hold an earlier life's
// POST, settled once this life is settle old. It reports whether the
// reply is known to be in the room.
func (l *loop) post(ctx context.Context, room, key, content string, mentions []wire.Mention, again bool) bool {
	if l.fl.noGuard {
		_, err := l.c.Post(ctx, room, content, mentions)
		return err == nil
	}
	if again && !l.fl.noSettle {
		pause(ctx, time.Until(l.began.Add(settle)))
	}
	for try := 0; try < 4 && ctx.Err() == nil; try++ {
		found, err := l.guard(ctx, room, key)
		if err != nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		if found {
			return true
		}
		_, err = l.c.Post(ctx, room, content, mentions)
		if err == nil {
			return true
		}
		var apiErr *wire.APIError
		if (l.fl.resendOn5xx && errors.As(err, &apiErr) && apiErr.Status >= 500) ||
			(l.fl.resendOnTimeout && isTimeout(err)) {
			// "It failed, so it is not there": sent again without a read.
			if _, err := l.c.Post(ctx, room, content, mentions); err == nil {
				return true
			}
		}
		if l.fl.blindRetry {
			for range 3 {
				if _, err := l.c.Post(ctx, room, content, mentions); err == nil {
					return true
				}
			}
			return false
		}
		if l.fl.noSettle {
			pause(ctx, 50*time.Millisecond)
		} else {
			pause(ctx, settle) // it may still land: read only once it cannot
		}
	}
	return false
}

// guard reports whether the reply with key is already in the room.
func (l *loop) guard(ctx context.Context, room, key string) (bool, error) {
	cursor := ""
	for {
		page, err := l.c.Context(ctx, room, cursor, 0)
		if err != nil {
			return false, err
		}
		for _, it := range page.Items {
			if l.fl.substringGuard {
				if strings.Contains(it.Content, key) {
					return true, nil
				}
				continue
			}
			if k, ok := oracle.MarkerKey(it.Content); ok && (it.SenderID == l.me || l.fl.anySenderGuard) && k == key {
				return true, nil
			}
		}
		if l.fl.onePageGuard || !page.HasMore {
			return false, nil
		}
		cursor = page.NextCursor
	}
}

// isTimeout reports whether err is the client giving up on a request.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &te) && te.Timeout())
}
