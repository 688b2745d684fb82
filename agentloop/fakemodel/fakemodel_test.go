package fakemodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/fakemodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, steps ...agentloop.Response) *fakemodel.Server {
	t.Helper()
	s, err := fakemodel.New(steps...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("the server listens on %s, want loopback", s.URL)
	}
	return s
}

var twoSteps = []agentloop.Response{
	{ToolCalls: []agentloop.ToolCall{{Name: "refund", Arguments: json.RawMessage(`{"order":"o-1"}`)}}},
	{Text: "Refunded."},
}

// The script answers by the turn's position: the same request gets the
// same step, with new tool-call ids, and the tool result round-trips.
func TestTheScriptAnswersByPositionWithNewIDsEachTime(t *testing.T) {
	s := start(t, twoSteps...)
	c := &fakemodel.Client{BaseURL: s.URL}
	ctx := context.Background()
	first := agentloop.Request{System: "be brief", Turns: []agentloop.Turn{{Role: agentloop.RoleUser, Text: "refund o-1"}}, MaxTokens: 100,
		Tools: []agentloop.ToolSpec{{Name: "refund", Description: "refunds", Schema: json.RawMessage(`{"type":"object"}`)}}}
	a, err := c.Complete(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Complete(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.ToolCalls) != 1 || a.ToolCalls[0].Name != "refund" || string(a.ToolCalls[0].Arguments) != `{"order":"o-1"}` {
		t.Fatalf("step 1: %+v", a)
	}
	if a.ToolCalls[0].ID == b.ToolCalls[0].ID {
		t.Errorf("two answers share the tool-call id %q", a.ToolCalls[0].ID)
	}
	next := first
	next.Turns = append(next.Turns, agentloop.Turn{Role: agentloop.RoleAssistant, ToolCalls: a.ToolCalls},
		agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: a.ToolCalls[0].ID, Text: "re_1"})
	fin, err := c.Complete(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if fin.Text != "Refunded." || len(fin.ToolCalls) != 0 || fin.StopReason != "end_turn" {
		t.Errorf("step 2: %+v", fin)
	}
	if got := s.Answered(); got[1] != 2 || got[2] != 1 {
		t.Errorf("answered by step: %v", got)
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if last.System != "be brief" || len(last.Tools) != 1 || len(last.Turns) != 3 || last.Turns[2].Text != "re_1" || last.Turns[2].ToolCallID != a.ToolCalls[0].ID {
		t.Errorf("the server decoded %+v", last)
	}
}

// The OpenAI wire: tool calls with string arguments, finish_reason
// tool_calls, then the final answer after a tool message.
func TestTheOpenAIWireSpeaksChatCompletions(t *testing.T) {
	s := start(t, twoSteps...)
	post := func(body string) map[string]any {
		res, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %v %v", res.Status, out, err)
		}
		return out
	}
	out := post(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"refund o-1"}],"tools":[{"type":"function","function":{"name":"refund","parameters":{"type":"object"}}}]}`)
	choice := out["choices"].([]any)[0].(map[string]any)
	calls := choice["message"].(map[string]any)["tool_calls"].([]any)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	if choice["finish_reason"] != "tool_calls" || fn["name"] != "refund" || fn["arguments"] != `{"order":"o-1"}` {
		t.Fatalf("step 1: %v", out)
	}
	id := calls[0].(map[string]any)["id"].(string)
	out = post(`{"model":"m","messages":[{"role":"user","content":"refund o-1"},{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"refund","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + id + `","content":"re_1"}]}`)
	choice = out["choices"].([]any)[0].(map[string]any)
	if choice["finish_reason"] != "stop" || choice["message"].(map[string]any)["content"] != "Refunded." {
		t.Errorf("step 2: %v", out)
	}
	reqs := s.Requests()
	if reqs[0].System != "be brief" || reqs[1].Turns[2].Role != agentloop.RoleTool || reqs[1].Turns[2].ToolCallID != id {
		t.Errorf("decoded: %+v", reqs)
	}
}

// Faults are applied one request each, in order: a 429 with Retry-After,
// a 5xx, and then the script answers.
func TestFaultsAnswerOneRequestEach(t *testing.T) {
	s := start(t, twoSteps...)
	s.Inject(fakemodel.Fault{Status: 429, RetryAfter: 1500 * time.Millisecond}, fakemodel.Fault{Status: 529})
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	for _, want := range []int{429, 529, 200} {
		res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("status %d (%s), want %d", res.StatusCode, raw, want)
		}
		if want == 429 && (res.Header.Get("Retry-After") != "2" || res.Header.Get("retry-after-ms") != "1500") {
			t.Errorf("429 headers: %v", res.Header)
		}
		if want != 200 && !bytes.Contains(raw, []byte(`"type":"error"`)) {
			t.Errorf("error body: %s", raw)
		}
	}
	if got := s.Answered(); got[1] != 1 {
		t.Errorf("answered: %v, want step 1 once", got)
	}
}

// A slow answer is held until the client gives up; the client's context
// ends the call.
func TestASlowAnswerEndsWithTheCallersContext(t *testing.T) {
	s := start(t, twoSteps...)
	s.Inject(fakemodel.Fault{Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := (&fakemodel.Client{BaseURL: s.URL}).Complete(ctx, agentloop.Request{Turns: []agentloop.Turn{{Role: agentloop.RoleUser, Text: "hi"}}})
		errc <- err
	}()
	for len(s.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the call ended with %v, want context.Canceled", err)
	}
	if got := s.Answered(); len(got) != 0 {
		t.Errorf("answered: %v, want nothing", got)
	}
}

// A body past MaxRequestBytes is refused with a clear error.
func TestAnOversizedRequestIsRefused(t *testing.T) {
	s := start(t, twoSteps...)
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", fakemodel.MaxRequestBytes) + `"}]}`
	res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}
