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

// supersedeGrace is how long (virtual time) a superseded instance may take
// to stop: its handlers get to notice their cancelled context.
const supersedeGrace = 10 * time.Second

// supersedeRecord is what the supersede check saw of the first instance.
type supersedeRecord struct {
	mu sync.Mutex
	// socketUp: the first instance has a socket; requests counts its
	// requests since.
	socketUp bool
	requests int
	// rivalAt is when the newer connection came up (zero before).
	rivalAt time.Time
	// knew: the first instance's socket was closed after the rival came,
	// so the supersede had reached it.
	knew bool
	// keptWorking is the first request it sent after it knew.
	keptWorking fakeband.Endpoint
	// stopped, or notStopped after supersedeGrace.
	stopped, notStopped bool
	stoppedAfter        time.Duration
	rivalFailed         error
}

// superviseFactory runs the agent as an operator's supervisor would when
// another connection takes over: in the first life, once the instance has
// a socket and has sent after more requests, a newer connection of the
// agent opens; the first instance must stop, and a fresh instance from the
// factory then carries on.
func (o *observation) superviseFactory(f Factory, after int) proof.Factory {
	return func() proof.Agent {
		return func(ctx context.Context, pe proof.Env) error {
			if pe.Life > 1 {
				return f()(ctx, o.env(ctx, pe))
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
	rt.onRequest = func(ep fakeband.Endpoint) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.knew && rec.keptWorking == "" && mutating(ep) {
			rec.keptWorking = ep
		}
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
		return &watchedSocket{ReadWriteCloser: rwc, rec: rec}
	}
	ctxA, cancelA := context.WithCancel(ctx)
	defer cancelA()
	doneA := make(chan error, 1)
	go func() { doneA <- f()(ctxA, envA) }()

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
	grace := time.NewTimer(supersedeGrace)
	defer grace.Stop()
	select {
	case <-doneA:
		rec.mu.Lock()
		rec.stopped, rec.stoppedAfter = true, time.Since(rec.rivalAt)
		rec.mu.Unlock()
	case <-grace.C:
		rec.mu.Lock()
		rec.notStopped = true
		rec.mu.Unlock()
		cancelA()
		<-doneA
	case <-ctx.Done():
		cancelA()
		<-doneA
		return nil
	}
	_ = rival.CloseNow()
	return f()(ctx, o.env(ctx, pe))
}

// factory runs the agent plainly: every life a fresh instance.
func (o *observation) factory(f Factory) proof.Factory {
	return func() proof.Agent {
		a := f()
		return func(ctx context.Context, pe proof.Env) error { return a(ctx, o.env(ctx, pe)) }
	}
}

// mutating reports whether a request changes something at Band, or fights
// for the agent's connection.
func mutating(ep fakeband.Endpoint) bool {
	switch ep {
	case fakeband.EndpointProcessing, fakeband.EndpointProcessed, fakeband.EndpointFailed,
		fakeband.EndpointPost, fakeband.EndpointEvent, fakeband.EndpointSocket:
		return true
	}
	return false
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

// watchedSocket notes when the first instance's socket closes after the
// rival came: from then on the instance knows it was superseded.
type watchedSocket struct {
	io.ReadWriteCloser
	rec *supersedeRecord
}

func (s *watchedSocket) Read(p []byte) (int, error) {
	n, err := s.ReadWriteCloser.Read(p)
	if err != nil {
		s.rec.mu.Lock()
		if !s.rec.rivalAt.IsZero() {
			s.rec.knew = true
		}
		s.rec.mu.Unlock()
	}
	return n, err
}
