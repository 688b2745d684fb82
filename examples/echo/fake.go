package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// runFake tells a short story on the in-process fake Band, in plain
// lines: a message and its answer; a crash right after an answer is
// posted, and the fresh process that does not post it again; an
// interrupt; a stop and a play. Then it prints the room as the people in
// it see it. The story waits for each event before it tells it, so the
// output is the same at every run.
func runFake(ctx context.Context, out io.Writer, logger *slog.Logger) error {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent := band.AddAgent("echo")
	ada := band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	d := &demo{
		band: band, agent: agent, ada: ada, room: room.ID, out: out, logger: logger,
		started: make(chan *bandonce.Message), proceed: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := d.story(ctx); err != nil {
		return err
	}
	d.transcript()
	return nil
}

// demo is the story's cast and the handler's leash: every handler call
// announces itself on started and works until proceed lets it answer or
// its context ends, so the story can act while it works.
type demo struct {
	band   *fakeband.Band
	agent  fakeband.Agent
	ada    fakeband.Human
	room   string
	out    io.Writer
	logger *slog.Logger

	started chan *bandonce.Message
	proceed chan struct{}
}

func (d *demo) story(ctx context.Context) (err error) {
	d.say("A demo of band-once: the echo agent and ada, in one room of an in-process fake Band.")
	var gone []*process // every process started, each waited for at the end
	defer func() {
		for _, p := range gone {
			err = errors.Join(err, p.stop())
		}
	}()
	p, err := d.start(ctx)
	if err != nil {
		return err
	}
	gone = append(gone, p)

	d.say("\n1. A message")
	id, err := d.ask("hello")
	if err != nil {
		return err
	}
	if err := d.answer(ctx, p, id, 1, bandonce.Replied); err != nil {
		return err
	}
	d.say("   echo answers: %s", d.lastAnswer())

	d.say("\n2. A crash after the post")
	p.crashAfterNextPost()
	if id, err = d.ask("are you still there?"); err != nil {
		return err
	}
	if _, err := d.working(ctx, id, 1); err != nil {
		return err
	}
	d.proceed <- struct{}{}
	if err := p.crashed(ctx); err != nil {
		return err
	}
	d.say("   echo posts its answer, and its process dies before Band's response arrives")
	if p, err = d.start(ctx); err != nil {
		return err
	}
	gone = append(gone, p)
	d.say("   a fresh echo process starts; it remembers nothing, and Band serves the message again")
	if err := d.answer(ctx, p, id, 2, bandonce.DuplicateDropped); err != nil {
		return err
	}
	d.say("   its handler runs again (attempt 2); before posting, the guard reads the room,")
	d.say("   finds the answer there, and posts nothing: %d answer in the room", d.answers(id))

	d.say("\n3. An interrupt")
	if id, err = d.ask("count to a million"); err != nil {
		return err
	}
	if _, err := d.working(ctx, id, 1); err != nil {
		return err
	}
	d.say("   echo starts working on it")
	if err := d.band.Interrupt(d.agent.ID, d.room); err != nil {
		return err
	}
	d.say("   echo's operator interrupts it")
	if _, err := p.outcome(ctx, id, bandonce.Interrupted); err != nil {
		return err
	}
	d.say("   echo drops the work and posts nothing (%d answers); Band will not serve the message again", d.answers(id))

	d.say("\n4. A stop and a play")
	if id, err = d.ask("take your time"); err != nil {
		return err
	}
	if _, err := d.working(ctx, id, 1); err != nil {
		return err
	}
	d.say("   echo starts working on it")
	if err := d.band.StopRoom(d.room); err != nil {
		return err
	}
	d.say("   ada presses stop: the work is cancelled, and the message is kept for later")
	if _, err := p.outcome(ctx, id, bandonce.Stopped); err != nil {
		return err
	}
	if err := d.band.PlayRoom(d.room); err != nil {
		return err
	}
	d.say("   ada presses play: Band serves the message again")
	if err := d.answer(ctx, p, id, 2, bandonce.Replied); err != nil {
		return err
	}
	d.say("   echo works on it again (attempt 2) and answers: %s", d.lastAnswer())
	return nil
}

// say prints one line of the story.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

// ask has ada say text to echo, and tells it.
func (d *demo) ask(text string) (string, error) {
	d.say("   ada: %s", text)
	return d.band.Say(d.room, d.ada.ID, text, d.agent.ID)
}

// working waits until echo's handler works on message id, at attempt.
func (d *demo) working(ctx context.Context, id string, attempt int) (*bandonce.Message, error) {
	t := time.NewTimer(storyStepTimeout)
	defer t.Stop()
	select {
	case m := <-d.started:
		if m.ID != id || m.Attempt != attempt {
			return nil, fmt.Errorf("echo works on message %s at attempt %d; the story expected %s at attempt %d", m.ID, m.Attempt, id, attempt)
		}
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("echo did not start work on message %s within %s", id, storyStepTimeout)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// answer lets echo's handler answer message id at attempt, and waits for
// the shell to end it as want.
func (d *demo) answer(ctx context.Context, p *process, id string, attempt int, want bandonce.OutcomeKind) error {
	if _, err := d.working(ctx, id, attempt); err != nil {
		return err
	}
	d.proceed <- struct{}{}
	_, err := p.outcome(ctx, id, want)
	return err
}

// handler is echo's Echo, on the leash.
func (d *demo) handler() bandonce.Handler {
	echo := Echo(0)
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		select {
		case d.started <- m:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		select {
		case <-d.proceed:
		case <-ctx.Done():
			return nil, context.Cause(ctx) // interrupted, stopped or shutting down
		}
		return echo(ctx, m)
	}
}

// answers counts echo's posts in the room that answer message id.
func (d *demo) answers(id string) int {
	n := 0
	for _, p := range d.band.Posts(d.room) {
		if p.SenderID == d.agent.ID && strings.HasSuffix(p.Content, "[dedup_key:echo:"+id+"]") {
			n++
		}
	}
	return n
}

// lastAnswer is the text of echo's latest post, without its marker line.
func (d *demo) lastAnswer() string {
	posts := d.band.Posts(d.room)
	for i := len(posts) - 1; i >= 0; i-- {
		if posts[i].SenderID == d.agent.ID {
			text, _ := splitMarker(posts[i].Content)
			return text
		}
	}
	return ""
}

// transcript prints the room as the people in it see it: every answer
// ends in the marker line the guard looks for.
func (d *demo) transcript() {
	d.say("\nThe room as ada sees it. Each answer ends in the [dedup_key:...] line the guard")
	d.say("reads back after a crash; it is part of the message, so people see it too:")
	names := map[string]string{d.agent.ID: d.agent.Name, d.ada.ID: d.ada.Name}
	for _, p := range d.band.Posts(d.room) {
		text, marker := splitMarker(p.Content)
		d.say("   %-4s | %s", names[p.SenderID], text)
		if marker != "" {
			d.say("   %-4s | %s", "", marker)
		}
	}
}

// splitMarker splits a post into its text, mention markers removed, and
// its dedup marker line, if it has one.
func splitMarker(content string) (text, marker string) {
	content = strings.TrimRight(content, "\n")
	if i := strings.LastIndexByte(content, '\n'); i >= 0 && strings.HasPrefix(content[i+1:], "[dedup_key:") {
		content, marker = content[:i], content[i+1:]
	}
	return bandonce.StripMentions(content), marker
}

// storyStepTimeout bounds each wait of the story: the fake answers in
// microseconds, so a step that takes this long is broken.
const storyStepTimeout = 10 * time.Second

// errCrashed is the cause a process dies with.
var errCrashed = errors.New("the echo process crashed")

// process is one run of the echo agent, as if in its own OS process: its
// own Shell, with a fresh in-memory ledger, and its own connection to
// Band, which a crash severs.
type process struct {
	conn     *crashable
	cancel   context.CancelCauseFunc
	done     chan error
	dead     chan struct{}
	outcomes chan bandonce.Outcome
}

// start runs a fresh echo process.
func (d *demo) start(ctx context.Context) (*process, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	p := &process{cancel: cancel, done: make(chan error, 1), dead: make(chan struct{}), outcomes: make(chan bandonce.Outcome, 64)}
	logs := mortalLogs{inner: d.logger.Handler(), dead: new(atomic.Bool)}
	p.conn = &crashable{inner: d.band.HTTPClient().Transport, die: func() {
		logs.dead.Store(true)
		d.band.DropSockets(d.agent.ID) // its socket dies with it
		cancel(errCrashed)
		close(p.dead)
	}}
	shell, err := bandonce.New(bandonce.Config{
		APIKey:     d.agent.Key,
		BaseURL:    d.band.BaseURL(),
		SocketURL:  d.band.SocketURL(),
		HTTPClient: &http.Client{Transport: p.conn},
		Handler:    d.handler(),
		Logger:     slog.New(logs),
		Hooks:      bandonce.Hooks{Outcome: func(o bandonce.Outcome) { p.outcomes <- o }},
		// An idle room asks Band again every ResyncInterval, in case a
		// push was lost (production: 60 s). A fresh process joins its
		// room's channel just after it starts serving, and a message said
		// in that instant is pushed to nobody: the story says its lines
		// fast enough to land there, so it keeps the wait short.
		ResyncInterval: 200 * time.Millisecond,
		// What is left of a crashed process retries into its severed
		// connection until its retries run out; a real one is gone at once,
		// so the story keeps those retries short.
		Retry: bandonce.RetryPolicy{BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		// After a crash the shell reads the room for a reply the crashed
		// process may have sent only once such a send can no longer land
		// (production: 60 s). The fake applies a request when it serves
		// it, never later, so the story keeps that wait short.
		SettleWindow: 300 * time.Millisecond,
	})
	if err != nil {
		cancel(nil)
		return nil, err
	}
	go func() { p.done <- shell.Run(ctx) }()
	return p, nil
}

// crashAfterNextPost arms the crash: the next answer Band applies kills
// the process before the response reaches it.
func (p *process) crashAfterNextPost() { p.conn.armed.Store(true) }

// crashed waits until the armed crash happened. The dead process can no
// longer reach Band, nor log; what is left of it is waited for at the end.
func (p *process) crashed(ctx context.Context) error {
	t := time.NewTimer(storyStepTimeout)
	defer t.Stop()
	select {
	case <-p.dead:
		return nil
	case <-t.C:
		return fmt.Errorf("the echo process did not post within %s", storyStepTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// stop shuts the process down, as Ctrl-C does; a crashed process is
// already gone.
func (p *process) stop() error {
	p.cancel(nil)
	return p.wait()
}

func (p *process) wait() error {
	t := time.NewTimer(storyStepTimeout)
	defer t.Stop()
	select {
	case err := <-p.done:
		p.done <- err // so a later wait returns at once
		return err
	case <-t.C:
		return fmt.Errorf("the echo process did not stop within %s", storyStepTimeout)
	}
}

// outcome waits for the process to end message id, and checks how.
func (p *process) outcome(ctx context.Context, id string, want bandonce.OutcomeKind) (bandonce.Outcome, error) {
	t := time.NewTimer(storyStepTimeout)
	defer t.Stop()
	for {
		select {
		case o := <-p.outcomes:
			if o.MessageID != id {
				continue
			}
			if o.Kind != want {
				return o, fmt.Errorf("echo ended message %s as %s; the story expected %s (%v)", id, o.Kind, want, o.Err)
			}
			return o, nil
		case <-t.C:
			return bandonce.Outcome{}, fmt.Errorf("echo did not end message %s within %s", id, storyStepTimeout)
		case <-ctx.Done():
			return bandonce.Outcome{}, context.Cause(ctx)
		}
	}
}

// mortalLogs is a process's log handler: silent once the process is dead,
// as a crashed process writes nothing.
type mortalLogs struct {
	inner slog.Handler
	dead  *atomic.Bool
}

func (h mortalLogs) Enabled(ctx context.Context, level slog.Level) bool {
	return !h.dead.Load() && h.inner.Enabled(ctx, level)
}

func (h mortalLogs) Handle(ctx context.Context, r slog.Record) error {
	if h.dead.Load() {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h mortalLogs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return mortalLogs{h.inner.WithAttrs(attrs), h.dead}
}

func (h mortalLogs) WithGroup(name string) slog.Handler {
	return mortalLogs{h.inner.WithGroup(name), h.dead}
}

// crashable is a process's connection to Band. Once armed, the first
// answer POST that Band applies kills the process before the response
// arrives: the worst moment for a crash, since the answer is in the room
// and the process never learns it.
type crashable struct {
	inner       http.RoundTripper
	armed, dead atomic.Bool
	die         func()
}

func (c *crashable) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	resp, err := c.inner.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/messages") &&
		resp.StatusCode/100 == 2 && c.armed.CompareAndSwap(true, false) {
		_ = resp.Body.Close()
		c.dead.Store(true)
		c.die()
		return nil, errCrashed
	}
	return resp, err
}
