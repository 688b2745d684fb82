package verify

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/proof"
)

// supersedeRecord is what the supersede check saw of the first instance.
type supersedeRecord struct {
	mu sync.Mutex
	// socketUp: the first instance has a socket; requests counts its
	// requests since.
	socketUp bool
	requests int
	// rivalAt is when the newer connection came up (zero before).
	rivalAt time.Time
	// stopped: the first instance returned after the rival came, after
	// stoppedAfter.
	stopped      bool
	stoppedAfter time.Duration
	rivalFailed  error
}

// superviseFactory runs the agent as an operator's supervisor would when
// another connection takes over: in the first life, once the instance has
// a socket and has sent after more requests, a newer connection of the
// agent opens, and Band supersedes the instance. The engine judges the
// instance from the moment the supersede push reaches it (SupersedeStops:
// nothing new sent after it, stopped within its grace); once it stops,
// the engine starts the next life, a fresh instance that carries on.
func (o *observation) superviseFactory(f Factory, after int) proof.Factory {
	return func() proof.Agent {
		return func(ctx context.Context, pe proof.Env) error {
			if pe.Life > 1 {
				env := o.env(ctx, pe)
				defer markReturned(env)
				return f()(ctx, env)
			}
			rec := &supersedeRecord{}
			o.mu.Lock()
			o.supersede = rec
			o.mu.Unlock()
			return o.supervise(ctx, pe, f, after, rec)
		}
	}
}

func (o *observation) supervise(ctx context.Context, pe proof.Env, f Factory, after int, rec *supersedeRecord) error {
	trigger := make(chan struct{})
	var once sync.Once
	envA := o.env(ctx, pe)
	rt := envA.HTTPClient.Transport.(*recorder)
	rt.onRequest = func(fakeband.Endpoint) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.socketUp {
			rec.requests++
			if rec.requests >= after {
				once.Do(func() { close(trigger) })
			}
		}
	}
	rt.onSocket = func(rwc io.ReadWriteCloser) io.ReadWriteCloser {
		rec.mu.Lock()
		rec.socketUp = true
		rec.mu.Unlock()
		return rwc
	}
	ctxA, cancelA := context.WithCancel(ctx)
	defer cancelA()
	doneA := make(chan error, 1)
	go func() {
		err := f()(ctxA, envA)
		markReturned(envA)
		doneA <- err
	}()

	select {
	case <-trigger:
	case err := <-doneA:
		return err // returned on its own: the engine judges that
	case <-ctx.Done():
		cancelA()
		return <-doneA
	}
	rec.mu.Lock()
	rec.rivalAt = time.Now() // the rival's upgrade is what supersedes
	rec.mu.Unlock()
	rival, err := dialRival(ctx, o.env(ctx, pe))
	if err != nil {
		rec.mu.Lock()
		rec.rivalFailed = err
		rec.mu.Unlock()
		<-ctx.Done()
		cancelA()
		return <-doneA
	}
	defer func() { _ = rival.CloseNow() }()
	select {
	case <-doneA:
		rec.mu.Lock()
		rec.stopped, rec.stoppedAfter = true, time.Since(rec.rivalAt)
		rec.mu.Unlock()
		return nil // stopped: the engine starts a fresh instance
	case <-ctx.Done():
		cancelA()
		<-doneA
		return nil
	}
}

// factory runs the agent plainly: every life a fresh instance.
func (o *observation) factory(f Factory) proof.Factory {
	return func() proof.Agent {
		a := f()
		return func(ctx context.Context, pe proof.Env) error {
			env := o.env(ctx, pe)
			defer markReturned(env)
			return a(ctx, env)
		}
	}
}

// dialRival opens a newer connection of the agent, which supersedes the
// older ones.
func dialRival(ctx context.Context, env Env) (*websocket.Conn, error) {
	header := http.Header{}
	header.Set("X-Api-Key", env.APIKey)
	conn, resp, err := websocket.Dial(ctx, env.SocketURL+"?vsn=2.0.0", &websocket.DialOptions{HTTPClient: env.HTTPClient, HTTPHeader: header})
	if resp != nil && resp.Body != nil && err != nil {
		_ = resp.Body.Close()
	}
	return conn, err
}
