package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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

var errKilled = errors.New("process killed")

// killSwitch is a transport that kills the shell at its n-th request:
// before the request reaches Band, or after Band applied it and before the
// answer arrives. From then on every request fails, as for a dead process.
type killSwitch struct {
	next  http.RoundTripper
	at    int
	after bool
	kill  func()

	mu   sync.Mutex
	n    int
	dead bool
}

func (k *killSwitch) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, errKilled
	}
	k.n++
	n := k.n
	if n == k.at && !k.after {
		k.die()
		k.mu.Unlock()
		return nil, errKilled
	}
	k.mu.Unlock()
	resp, err := k.next.RoundTrip(req)
	if n == k.at && k.after {
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		k.mu.Lock()
		k.die()
		k.mu.Unlock()
		return nil, errKilled
	}
	return resp, err
}

func (k *killSwitch) die() {
	k.dead = true
	k.kill()
}

func (k *killSwitch) requests() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

// runWithKill runs a shell whose transport kills it at request at, waits
// for it to end, and returns how many requests it made.
func runWithKill(t *testing.T, w *world, at int, after bool) int {
	t.Helper()
	return runConfigWithKill(t, w, w.config(echo), at, after)
}

// runConfigWithKill is runWithKill for a given config.
func runConfigWithKill(t *testing.T, w *world, cfg bandonce.Config, at int, after bool) int {
	t.Helper()
	ks := &killSwitch{next: w.band.HTTPClient().Transport, at: at, after: after}
	cfg.HTTPClient = &http.Client{Transport: ks}
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	ctx, cancel := contextWithCancel()
	ks.kill = cancel
	go func() { done <- s.Run(ctx) }()
	time.Sleep(20 * time.Second)
	cancel()
	<-done
	return ks.requests()
}

// turnCheck judges what Band holds after a turn's crash and the life after
// it: room and id are the room and its one message, durable whether the
// lives shared a durable ledger.
type turnCheck func(t *testing.T, w *world, room fakeband.Room, id string, durable bool)

// crashAtEveryRequestOfATurn says "refund order 17" in a room and, on a
// forgetful and on a durable ledger, kills a shell at each request a clean
// run of the handler makes (at least minRequests, which are what), before
// and after Band applied it, then lets a fresh shell on the same ledger
// finish; check then judges the room. newTurn makes the handler of one such
// pair of lives and its check, which may share state.
func crashAtEveryRequestOfATurn(t *testing.T, minRequests int, what string, newTurn func() (bandonce.Handler, turnCheck)) {
	t.Helper()
	crashAtEveryRequestOfATurnSaying(t, "refund order 17", minRequests, what, newTurn)
}

// crashAtEveryRequestOfATurnSaying is crashAtEveryRequestOfATurn for a
// message that says text.
func crashAtEveryRequestOfATurnSaying(t *testing.T, text string, minRequests int, what string, newTurn func() (bandonce.Handler, turnCheck)) {
	t.Helper()
	var total int
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], text)
		h, _ := newTurn()
		total = runConfigWithKill(t, w, w.config(h), -1, false)
	})
	require.GreaterOrEqual(t, total, minRequests, what)
	for _, durable := range []bool{false, true} {
		for at := 1; at <= total; at++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("durable=%v request %d after=%v", durable, at, after), func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "agent.ledger")
					synctest.Test(t, func(t *testing.T) {
						w := newWorld(t, 1)
						room := w.rooms[0]
						id := w.say(room, text)
						h, check := newTurn()
						life := func(at int) {
							cfg := w.config(h)
							if durable {
								ledger, err := boltledger.Open(path, boltledger.Options{AgentID: w.agent.ID})
								require.NoError(t, err)
								defer ledger.Close()
								cfg.Ledger = ledger
							}
							runConfigWithKill(t, w, cfg, at, after)
						}
						life(at)
						life(-1)
						check(t, w, room, id, durable)
					})
				})
			}
		}
	}
}

// Crash the shell at every request boundary of two messages' lifecycles,
// both before the request is sent and after Band applied it, then start a
// fresh shell on the same Band: every message gets exactly one reply and
// ends processed.
func TestCrashAtEveryRequestBoundary(t *testing.T) {
	var total int
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.say(w.rooms[0], "a")
		w.say(w.rooms[0], "b")
		total = runWithKill(t, w, -1, false) // a run without a kill: the boundaries to visit
	})
	require.GreaterOrEqual(t, total, 10, "me, chats, then next/processing/post/processed twice, then next")
	for at := 1; at <= total; at++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("request %d, after=%v", at, after), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t, 1)
					ids := []string{w.say(w.rooms[0], "a"), w.say(w.rooms[0], "b")}
					runWithKill(t, w, at, after)
					stop := w.start(w.config(echo))
					runFor(time.Minute)
					require.NoError(t, stop())
					t.Logf("context reads: %d", w.band.Requests()["context"])
					for _, id := range ids {
						assert.Equal(t, 1, w.repliesTo(w.rooms[0], bandonce.DefaultKey(id)), "message %s", id)
						assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
					}
				})
			})
		}
	}
}

// killNow kills the shell from outside a request, as a crash in the
// middle of the shell's own bookkeeping would.
func (k *killSwitch) killNow() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dead {
		k.die()
	}
}

// deadTransport fails every request, those in flight included, once dead
// is closed, as a SIGKILLed process's connections do; Band may still
// apply what it holds.
type deadTransport struct {
	next http.RoundTripper
	dead chan struct{}
}

func (d *deadTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-d.dead:
		return nil, errKilled
	default:
	}
	type res struct {
		r *http.Response
		e error
	}
	ch := make(chan res, 1)
	go func() {
		r, e := d.next.RoundTrip(req)
		ch <- res{r, e}
	}()
	select {
	case x := <-ch:
		return x.r, x.e
	case <-d.dead:
		return nil, errKilled
	}
}

// killLifeAt runs a shell on cfg and kills it after d.
func killLifeAt(t *testing.T, w *world, cfg bandonce.Config, d time.Duration) {
	t.Helper()
	dt := &deadTransport{next: w.band.HTTPClient().Transport, dead: make(chan struct{})}
	cfg.HTTPClient = &http.Client{Transport: dt}
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(d)
	close(dt.dead)
	cancel()
	t.Cleanup(func() { <-done })
}
