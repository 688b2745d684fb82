package agentloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/fakeband"
)

// A turn that fails half-way (a tool's transient error after the second
// model call was recorded) is replayed at the redelivery: the recorded
// model calls are not made again, the tool that ran does not run again,
// and the turn goes on from where it stopped.
func TestARedeliveryReplaysRecordedModelCallsAndRunsNoToolTwice(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{call("lookup", `{"x":"a"}`)}},
		{ToolCalls: []agentloop.ToolCall{call("lookup", `{"x":"b"}`), call("flaky", `{}`)}},
		{Text: "all done"},
	}}
	var e effects
	flaky := e.tool("flaky")
	run := flaky.Run
	var failed atomic.Bool
	flaky.Run = func(ctx context.Context, c agentloop.Call) (string, error) {
		if failed.CompareAndSwap(false, true) {
			return "", errors.New("flaky: service unavailable")
		}
		return run(ctx, c)
	}
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("lookup"), flaky}}
	w.serve(t, loop.Handler())
	msg := w.say(t, "please look things up")
	w.waitStatus(t, msg, fakeband.StatusProcessed)

	calls, byPos := m.counts()
	if calls != 3 || byPos[1] != 1 || byPos[2] != 1 || byPos[3] != 1 {
		t.Errorf("model calls: %d in all, by position %v; want each of 3 once", calls, byPos)
	}
	want := map[string]int{
		"msg:" + msg + ":agentloop:tool:1:0": 1,
		"msg:" + msg + ":agentloop:tool:2:0": 1,
		"msg:" + msg + ":agentloop:tool:2:1": 1,
	}
	if got := e.snapshot(); !equal(got, want) {
		t.Errorf("tool runs by key: %v, want %v", got, want)
	}
	posts := w.agentPosts()
	if len(posts) != 1 || posts[0] != "all done (worded #3)" {
		t.Errorf("the agent posted %q, want the one final answer", posts)
	}
}

// The keys of tool calls come from their place in the turn, so they are
// the same at every delivery although the model numbers its calls afresh
// each time; the model's ids only pair a call with its result.
func TestToolKeysComeFromTheirPlaceNotFromTheModelsIDs(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{call("lookup", `{}`)}},
		{Text: "ok"},
	}}
	var e effects
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("lookup")}}
	var mu sync.Mutex
	var results []*agentloop.Result
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		res, err := loop.Run(ctx, msg)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		results = append(results, res)
		mu.Unlock()
		if msg.Attempt == 1 {
			return nil, errors.New("crash after the loop")
		}
		return &bandonce.Reply{Content: res.Text, Mentions: []string{msg.SenderID}}, nil
	})
	msg := w.say(t, "hi")
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	if calls, _ := m.counts(); calls != 2 {
		t.Errorf("model calls: %d, want 2 (one per journaled step)", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 {
		t.Fatalf("%d completed loops, want 2", len(results))
	}
	a, b := results[0].Conversation, results[1].Conversation
	if len(a) != len(b) || a[1].ToolCalls[0].ID != b[1].ToolCalls[0].ID || a[3].Text != b[3].Text {
		t.Errorf("the replay took another path:\n%+v\n%+v", a, b)
	}
	if got := e.snapshot(); len(got) != 1 || got["msg:"+msg+":agentloop:tool:1:0"] != 1 {
		t.Errorf("tool runs by key: %v", got)
	}
	e.mu.Lock()
	idem := e.idem["msg:"+msg+":agentloop:tool:1:0"]
	e.mu.Unlock()
	if !strings.HasPrefix(idem, "bandonce-") {
		t.Errorf("a journaled tool got idempotency key %q, want the Step's", idem)
	}
}

// A stop cancels the model call in flight; the call recorded before it is
// kept, and after play the redelivery makes only the calls not recorded.
func TestAStopCancelsTheModelCallInFlightAndKeepsTheRecordedPart(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{call("lookup", `{}`)}},
		{Text: "done"},
	}}
	inFlight := make(chan struct{})
	causes := make(chan error, 1)
	var blocked atomic.Bool
	model := agentloop.ModelFunc(func(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
		if len(req.Turns) > 1 && blocked.CompareAndSwap(false, true) {
			close(inFlight)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return agentloop.Response{}, ctx.Err()
		}
		return m.Complete(ctx, req)
	})
	var e effects
	loop := &agentloop.Loop{Model: model, Tools: []agentloop.Tool{e.tool("lookup")}}
	w.serve(t, loop.Handler())
	msg := w.say(t, "hi")
	<-inFlight
	if err := w.fb.StopRoom(w.room.ID); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, bandonce.ErrStopped) {
		t.Errorf("the model call ended with %v, want ErrStopped", cause)
	}
	if err := w.fb.PlayRoom(w.room.ID); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	if _, byPos := m.counts(); byPos[1] != 1 || byPos[2] != 1 {
		t.Errorf("model calls by position after play: %v, want the first once (recorded) and the second once", byPos)
	}
	if got := e.snapshot(); len(got) != 1 {
		t.Errorf("tool runs: %v, want one", got)
	}
}

// A response too large for the ledger is not acted on: the turn fails with
// ErrResponseTooLarge, marked permanent, and none of its tools runs.
func TestAResponseTooLargeToRecordRunsNoneOfItsTools(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{Text: strings.Repeat("x", bandonce.MaxStepResult), ToolCalls: []agentloop.ToolCall{call("pay", `{}`)}},
	}}
	var e effects
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("pay")}}
	errs := make(chan error, 10)
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		_, err := loop.Run(ctx, msg)
		errs <- err
		return nil, err
	})
	w.say(t, "hi")
	err := <-errs
	if !errors.Is(err, agentloop.ErrResponseTooLarge) || !isPermanent(err) {
		t.Errorf("Run returned %v, want a permanent ErrResponseTooLarge", err)
	}
	if got := e.snapshot(); len(got) != 0 {
		t.Errorf("tool runs: %v, want none", got)
	}
}

// A call of a tool that does not exist, arguments that are not an object,
// and a tool's refusal are results the model reads, not failures of the
// turn.
func TestTheModelsMistakesAreResultsItReads(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{call("nope", `{}`), call("lookup", `[1]`), call("lookup", `null`), call("picky", `{}`),
			call("lookup", `{"order":"o-`)}}, // a call cut short by max_tokens
		{Text: "sorry"},
	}}
	var e effects
	picky := agentloop.Tool{Name: "picky", Description: "refuses", Schema: []byte(`{"type":"object"}`),
		Run: func(context.Context, agentloop.Call) (string, error) {
			return "", agentloop.Refuse("order-9 does not exist")
		}}
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("lookup"), picky}}
	w.serve(t, loop.Handler())
	msg := w.say(t, "hi")
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	m.mu.Lock()
	last := m.seen[len(m.seen)-1].Turns
	m.mu.Unlock()
	results := last[len(last)-5:]
	for i, want := range []string{`no tool is named "nope"`, "not a JSON object", "not a JSON object: null", "order-9 does not exist", "not a JSON object"} {
		if !results[i].IsError || !strings.Contains(results[i].Text, want) || results[i].ToolCallID == "" {
			t.Errorf("result %d: %+v, want an error naming %q, paired with the model's id", i, results[i], want)
		}
	}
	if got := e.snapshot(); len(got) != 0 {
		t.Errorf("tool runs: %v, want none", got)
	}
}

// A turn that never reaches a final answer ends at MaxModelCalls.
func TestALoopThatNeverAnswersStopsAtMaxModelCalls(t *testing.T) {
	w := newWorld(t)
	steps := make([]agentloop.Response, 5)
	for i := range steps {
		steps[i] = agentloop.Response{ToolCalls: []agentloop.ToolCall{call("lookup", `{}`)}}
	}
	m := &script{steps: steps}
	var e effects
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("lookup")}, MaxModelCalls: 3}
	errs := make(chan error, 10)
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		_, err := loop.Run(ctx, msg)
		errs <- err
		return nil, err
	})
	w.say(t, "hi")
	if err := <-errs; !errors.Is(err, agentloop.ErrTooManyModelCalls) || !isPermanent(err) {
		t.Errorf("Run returned %v, want a permanent ErrTooManyModelCalls", err)
	}
	if calls, _ := m.counts(); calls != 3 {
		t.Errorf("model calls: %d, want 3", calls)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func isPermanent(err error) bool {
	var p *bandonce.PermanentError
	return errors.As(err, &p)
}

// A Loop.Name that cannot name the loop's steps is refused, Permanent,
// naming the field, before any model call: the shell's own prefix, a line
// break.
func TestALoopNameThatCannotNameItsStepsIsRefused(t *testing.T) {
	for _, name := range []string{"bandonce", "bandonce:x", "two\nlines", strings.Repeat("n", 230)} {
		l := &agentloop.Loop{Name: name, Model: unusedModel{t}}
		_, err := l.Run(context.Background(), &bandonce.Message{})
		if !isPermanent(err) || !strings.Contains(fmt.Sprint(err), "Loop.Name") {
			t.Errorf("Name %q: %v, want a Permanent error naming Loop.Name", name, err)
		}
	}
}

// unusedModel fails the test if it is called.
type unusedModel struct{ t *testing.T }

func (m unusedModel) Complete(context.Context, agentloop.Request) (agentloop.Response, error) {
	m.t.Error("the model was called")
	return agentloop.Response{}, errors.New("unused")
}

// A response of more tool calls than MaxToolCalls runs none of them: the
// turn is given up (the room is told), rather than every result going into
// every later request.
func TestAResponseOfTooManyToolCallsRunsNone(t *testing.T) {
	w := newWorld(t)
	calls := make([]agentloop.ToolCall, agentloop.MaxToolCalls+1)
	for i := range calls {
		calls[i] = call("lookup", `{}`)
	}
	m := &script{steps: []agentloop.Response{{ToolCalls: calls}, {Text: "final"}}}
	var e effects
	loop := &agentloop.Loop{Model: m, Tools: []agentloop.Tool{e.tool("lookup")}}
	errs := make(chan error, 10)
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		_, err := loop.Run(ctx, msg)
		errs <- err
		return nil, err
	})
	w.say(t, "hi")
	if err := <-errs; !errors.Is(err, agentloop.ErrTooManyToolCalls) || !isPermanent(err) {
		t.Errorf("Run returned %v, want a permanent ErrTooManyToolCalls", err)
	}
	if got := e.snapshot(); len(got) != 0 {
		t.Errorf("tool runs: %v, want none", got)
	}
}

// A final answer with no text is the turn's failure, named: the message
// is given up and the room told, with the model's empty answer as the
// reason (not a reply the shell refuses as blank).
func TestAnEmptyFinalAnswerIsNamedAndTellsTheRoom(t *testing.T) {
	w := newWorld(t)
	m := agentloop.ModelFunc(func(context.Context, agentloop.Request) (agentloop.Response, error) {
		return agentloop.Response{Text: " \n", StopReason: "end_turn"}, nil
	})
	h := (&agentloop.Loop{Model: m}).Handler()
	errs := make(chan error, 10)
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		rep, err := h(ctx, msg)
		errs <- err
		return rep, err
	})
	msg := w.say(t, "hi")
	if err := <-errs; !errors.Is(err, agentloop.ErrEmptyAnswer) || !isPermanent(err) {
		t.Errorf("Handler returned %v, want a permanent ErrEmptyAnswer", err)
	}
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	eventually(t, "the room told", func() bool {
		for _, e := range w.fb.Events() {
			if e.Kind == fakeband.EventChatEvent && e.Detail == "error" {
				return true
			}
		}
		return false
	})
	if posts := w.agentPosts(); len(posts) != 0 {
		t.Errorf("the agent posted %q, want nothing but the error event", posts)
	}
}
