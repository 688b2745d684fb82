package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// turns is a Handler for control tests. Each call records the message,
// works for a while (unless its context ends first), and echoes. What it
// saw is kept per message: the calls, the causes of the cancelled ones,
// and whether a call is still running.
type turns struct {
	mu           sync.Mutex
	work         time.Duration  // how long each call works before replying
	loadContext  bool           // call msg.RoomContext before working, as a tool would
	ignoreCancel bool           // keep working through a cancellation, then reply
	failFirst    map[string]int // fail the first n calls of these messages, at once
	dedupKey     func(id string) string
	calls        []string           // message ids, in call order
	cancelled    map[string][]error // causes, per message, of the calls that saw ctx end
	contextErrs  []error            // errors RoomContext returned
	afterWork    []string           // messages whose call got past its work: a tool result used
	running      int
}

func newTurns(work time.Duration) *turns {
	return &turns{work: work, failFirst: map[string]int{}, cancelled: map[string][]error{}}
}

// errTool is the handler failure failFirst produces.
var errTool = errors.New("tool failed")

func (h *turns) handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	h.mu.Lock()
	h.calls = append(h.calls, m.ID)
	h.running++
	work, load, ignore := h.work, h.loadContext, h.ignoreCancel
	fail := h.failFirst[m.ID] > 0
	if fail {
		h.failFirst[m.ID]--
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()

	if load {
		if _, err := m.RoomContext(ctx); err != nil {
			h.mu.Lock()
			h.contextErrs = append(h.contextErrs, err)
			h.mu.Unlock()
			h.noteCancel(ctx, m.ID)
			return nil, err
		}
	}
	if fail {
		return nil, errTool
	}
	if work > 0 {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			h.noteCancel(ctx, m.ID)
			if !ignore {
				// A reply returned after the cancellation must be dropped.
				return &bandonce.Reply{Content: "too late", Mentions: []string{m.SenderID}}, nil
			}
			<-t.C
		}
	} else if ctx.Err() != nil {
		h.noteCancel(ctx, m.ID)
	}
	h.mu.Lock()
	h.afterWork = append(h.afterWork, m.ID)
	h.mu.Unlock()
	rep := &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}
	if h.dedupKey != nil {
		rep.DedupKey = h.dedupKey(m.ID)
	}
	return rep, nil
}

func (h *turns) noteCancel(ctx context.Context, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancelled[id] = append(h.cancelled[id], context.Cause(ctx))
}

func (h *turns) setWork(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work = d
}

func (h *turns) failNext(id string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failFirst[id] = n
}

// callsOf is how many times the handler ran for the message.
func (h *turns) callsOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c == id {
			n++
		}
	}
	return n
}

func (h *turns) allCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// causes returns the causes of the message's cancelled calls.
func (h *turns) causes(id string) []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.cancelled[id]...)
}

func (h *turns) used(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.afterWork {
		if c == id {
			return true
		}
	}
	return false
}

func (h *turns) busy() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// outcomes records what Hooks.Outcome reported.
type outcomes struct {
	mu   sync.Mutex
	list []bandonce.Outcome
}

func (o *outcomes) add(x bandonce.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, x)
}

// of returns the kinds reported for a message, in order.
func (o *outcomes) of(id string) []bandonce.OutcomeKind {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []bandonce.OutcomeKind
	for _, x := range o.list {
		if x.MessageID == id {
			out = append(out, x.Kind)
		}
	}
	return out
}

func (o *outcomes) all() []bandonce.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bandonce.Outcome(nil), o.list...)
}

// logs is a slog.Handler that keeps every record, so tests can check
// what the shell logged and at which level.
type logs struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	level slog.Level
	text  string // the message and every attribute, "k=v"
}

func (l *logs) logger() *slog.Logger { return slog.New(&logSink{l: l}) }

// has reports whether a record at level mentions every one of parts.
func (l *logs) has(level slog.Level, parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.level != level {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r.text, p)
		}
		if all {
			return true
		}
	}
	return false
}

type logSink struct {
	l     *logs
	attrs []slog.Attr
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range s.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.records = append(s.l.records, logRecord{level: r.Level, text: b.String()})
	return nil
}

func (s *logSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSink{l: s.l, attrs: append(append([]slog.Attr(nil), s.attrs...), as...)}
}

func (s *logSink) WithGroup(string) slog.Handler { return s }

// marksOf returns the kinds of the agent's applied marks on a message.
func (w *world) marksOf(id string) []string {
	var out []string
	for _, m := range w.band.Marks(w.agent.ID, id) {
		out = append(out, m.Kind)
	}
	return out
}

// countMarks counts the agent's applied marks of one kind on a message.
func (w *world) countMarks(id, kind string) int {
	n := 0
	for _, k := range w.marksOf(id) {
		if k == kind {
			n++
		}
	}
	return n
}

// rig is a world with a tap, a turns handler, and what the shell
// reported, for the control tests.
type rig struct {
	*world
	tap  *tap
	h    *turns
	out  *outcomes
	logs *logs
	// invalid collects what Hooks.InvalidControl was called with.
	invalidMu sync.Mutex
	invalid   []invalidControl
}

type invalidControl struct {
	raw string
	err error
}

func newRig(t *testing.T, rooms int, work time.Duration) *rig {
	t.Helper()
	w := newWorld(t, rooms)
	return &rig{world: w, tap: newTap(w), h: newTurns(work), out: &outcomes{}, logs: &logs{}}
}

// config is the tap's config with the rig's handler, hooks and logger.
func (r *rig) config() bandonce.Config {
	cfg := r.tap.config(r.h.handle)
	cfg.Logger = r.logs.logger()
	cfg.Hooks.Outcome = r.out.add
	cfg.Hooks.InvalidControl = func(raw []byte, err error) {
		r.invalidMu.Lock()
		defer r.invalidMu.Unlock()
		r.invalid = append(r.invalid, invalidControl{raw: string(raw), err: err})
	}
	return cfg
}

// run starts a shell with the rig's config, changed by tweak if given,
// and lets it connect. The returned stop ends it and returns Run's error.
func (r *rig) run(tweak func(*bandonce.Config)) (stop func() error) {
	r.t.Helper()
	cfg := r.config()
	if tweak != nil {
		tweak(&cfg)
	}
	stop = startOnce(r.world, cfg)
	time.Sleep(time.Second)
	return stop
}

// stoppedRig starts a rig of one room whose handler works for work, with
// the messages says waiting there first, and stops the agent in that room.
// It returns the rig, the room, the ids of the messages said, and the run's
// stop.
func stoppedRig(t *testing.T, work time.Duration, says ...string) (r *rig, room fakeband.Room, ids []string, stop func() error) {
	t.Helper()
	r = newRig(t, 1, work)
	room = r.rooms[0]
	for _, text := range says {
		ids = append(ids, r.say(room, text))
	}
	stop = r.run(nil)
	require.NoError(t, r.band.StopRoom(room.ID))
	return r, room, ids, stop
}

// startOnce starts a shell like world.start, and also stops it when the
// test ends, so that a failed require inside a synctest bubble reports
// the failure instead of leaving the bubble deadlocked on a running
// shell. The returned stop may be called before that; it runs once.
func startOnce(w *world, cfg bandonce.Config) (stop func() error) {
	var once sync.Once
	var err error
	run := w.start(cfg)
	stop = func() error {
		once.Do(func() { err = run() })
		return err
	}
	w.t.Cleanup(func() { _ = stop() })
	return stop
}

func (r *rig) invalidReports() []invalidControl {
	r.invalidMu.Lock()
	defer r.invalidMu.Unlock()
	return append([]invalidControl(nil), r.invalid...)
}

// lastCorrelation returns the correlation id of the fake's latest push of
// the kind (fakeband.EventStop, EventPlay or EventInterrupt).
func (r *rig) lastCorrelation(kind string) string {
	id := ""
	for _, e := range r.band.Events() {
		if e.Kind == kind {
			id = e.Detail
		}
	}
	return id
}

// gateQuietly closes (or opens) Band's stop gate for the agent in room
// while the push that normally tells the shell is lost: /next answers 204
// and posts 403 there, and the shell hears nothing. Tests that push a stop
// of their own through the tap use it so that Band agrees with the shell,
// as it always does outside a test: a stopped room still probes /next now
// and then, and only Band's gate keeps those probes empty.
func (w *world) gateQuietly(room fakeband.Room, closed bool) {
	w.t.Helper()
	w.band.InjectSocket(fakeband.SocketFault{Event: "agent.control", Nth: 1, Kind: fakeband.LosePush})
	if closed {
		require.NoError(w.t, w.band.StopRoom(room.ID))
	} else {
		require.NoError(w.t, w.band.PlayRoom(room.ID))
	}
}

// probesOnly checks that a stopped room fetched nothing since the tap had
// served it servedBefore messages, and asked /next at most probes times:
// the probes of a stopped room, which Band's closed gate answers 204.
func (r *rig) probesOnly(t *testing.T, room fakeband.Room, nextsBefore, servedBefore, probes int) {
	t.Helper()
	assert.Equal(t, servedBefore, r.tap.servedNext(room.ID), "no /next answer carried a message while stopped")
	assert.LessOrEqual(t, r.tap.count("next", room.ID)-nextsBefore, probes, "only the stopped room's probes")
}

// socketConfig is the world's config with the Phoenix socket on, so control
// signals reach the shell.
func (w *world) socketConfig(h bandonce.Handler) bandonce.Config {
	cfg := w.config(h)
	cfg.DisableSocket = false
	return cfg
}

// slowHandler echoes after d unless its context ends first; it records the
// cause it saw.
type slowHandler struct {
	mu     sync.Mutex
	d      time.Duration
	causes []error
	calls  int
}

func (s *slowHandler) handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	s.mu.Lock()
	s.calls++
	d := s.d
	s.mu.Unlock()
	select {
	case <-time.After(d):
		return echo(ctx, m)
	case <-ctx.Done():
		s.mu.Lock()
		s.causes = append(s.causes, context.Cause(ctx))
		s.mu.Unlock()
		return &bandonce.Reply{Content: "too late", Mentions: []string{m.SenderID}}, nil
	}
}

// twoBusyRooms starts a shell whose handler works for work on one message
// in each of two rooms, and returns the two message ids.
func twoBusyRooms(t *testing.T, work time.Duration) (r *rig, ids [2]string, stop func() error) {
	r = newRig(t, 2, work)
	ids = [2]string{r.say(r.rooms[0], "in r1"), r.say(r.rooms[1], "in r2")}
	stop = r.run(nil)
	require.Equal(t, 2, r.h.busy(), "both handlers run")
	return r, ids, stop
}

// holdFirst holds the first request to endpoint for ten seconds, so a
// signal can land while it is in flight.
func holdFirst(w *world, endpoint fakeband.Endpoint) {
	w.band.Inject(fakeband.Fault{Endpoint: endpoint, Nth: 1, Kind: fakeband.Delay, Delay: 10 * time.Second})
}

func (s *slowHandler) setDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = d
}

func (s *slowHandler) seen() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.causes...)
}
