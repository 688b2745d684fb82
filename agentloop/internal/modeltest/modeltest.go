// Package modeltest is the suite every model adapter of package agentloop
// passes: a turn through the SDK against the fake model server, the SDK's
// own retries, an error past them, and a cancelled call. Each adapter's
// tests name the cases and hand it what differs between SDKs.
package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/fakemodel"
)

// Adapter is what the suite needs to know of one model adapter.
type Adapter struct {
	// New returns the adapter speaking to the fake model server at url,
	// its SDK retrying a failed call retries times.
	New func(url string, retries int) agentloop.Model
	// ToolUseStop is the stop reason the SDK reports for a tool call.
	ToolUseStop string
	// ToolErrors: the SDK's wire carries a tool result's IsError.
	ToolErrors bool
	// Status returns the HTTP status of an error of the SDK's own type,
	// and false for any other error.
	Status func(err error) (int, bool)
}

func setup(t *testing.T, a Adapter, retries int) (*fakemodel.Server, agentloop.Model) {
	t.Helper()
	s, err := fakemodel.New(
		agentloop.Response{ToolCalls: []agentloop.ToolCall{{Name: "refund", Arguments: json.RawMessage(`{"order":"o-1"}`)}}},
		agentloop.Response{Text: "Refunded."},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, a.New(s.URL, retries)
}

var first = agentloop.Request{
	System: "be brief", MaxTokens: 256,
	Turns: []agentloop.Turn{{Role: agentloop.RoleUser, Text: "refund o-1"}},
	Tools: []agentloop.ToolSpec{{Name: "refund", Description: "Refund an order.",
		Schema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"],"additionalProperties":false}`)}},
}

// RoundTrip runs a turn through the SDK: a tool call, its result sent back
// paired with the model's id, and the final answer; what the server decoded
// is what the loop asked.
func RoundTrip(t *testing.T, ad Adapter) {
	s, m := setup(t, ad, 0)
	ctx := context.Background()
	a, err := m.Complete(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.ToolCalls) != 1 || a.ToolCalls[0].Name != "refund" || string(a.ToolCalls[0].Arguments) != `{"order":"o-1"}` || a.StopReason != ad.ToolUseStop {
		t.Fatalf("step 1: %+v", a)
	}
	next := first
	next.Turns = append(next.Turns, agentloop.Turn{Role: agentloop.RoleAssistant, ToolCalls: a.ToolCalls},
		agentloop.Turn{Role: agentloop.RoleTool, ToolCallID: a.ToolCalls[0].ID, Text: "re_1", IsError: ad.ToolErrors})
	b, err := m.Complete(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if b.Text != "Refunded." || len(b.ToolCalls) != 0 {
		t.Errorf("step 2: %+v", b)
	}
	reqs := s.Requests()
	got := reqs[1]
	if got.System != "be brief" || got.MaxTokens != 256 || len(got.Tools) != 1 || len(got.Turns) != 3 {
		t.Fatalf("decoded: %+v", got)
	}
	var schema map[string]any
	if err := json.Unmarshal(got.Tools[0].Schema, &schema); err != nil || schema["additionalProperties"] != false || schema["required"] == nil {
		t.Errorf("the schema reached the server as %s", got.Tools[0].Schema)
	}
	if r := got.Turns[2]; r.Role != agentloop.RoleTool || r.ToolCallID != a.ToolCalls[0].ID || r.Text != "re_1" || r.IsError != ad.ToolErrors {
		t.Errorf("the tool result reached the server as %+v", r)
	}
}

// Retries checks that the SDK's own retries ride out a 429 with
// Retry-After and a 5xx; the answer is the script's step, once.
func Retries(t *testing.T, ad Adapter) {
	s, m := setup(t, ad, 2)
	s.Inject(fakemodel.Fault{Status: 429, RetryAfter: 10 * time.Millisecond}, fakemodel.Fault{Status: 500})
	a, err := m.Complete(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.ToolCalls) != 1 || len(s.Requests()) != 3 || s.Answered()[1] != 1 {
		t.Errorf("answer %+v after %d requests (answered %v), want step 1 after 3", a, len(s.Requests()), s.Answered())
	}
}

// ErrorPastTheRetries checks that with no retries left the SDK's error
// reaches the loop, which leaves the message to be delivered again.
func ErrorPastTheRetries(t *testing.T, ad Adapter) {
	s, m := setup(t, ad, 0)
	s.Inject(fakemodel.Fault{Status: 529})
	_, err := m.Complete(context.Background(), first)
	if status, ok := ad.Status(err); !ok || status != 529 {
		t.Errorf("err = %v, want the SDK's 529", err)
	}
}

// FailuresMeanWhatTheyMean checks what an error past the retries tells the
// shell: a Retry-After is waited (bandonce.RetryAfter's hint), a 400 can
// never succeed (Permanent), a 5xx is left to the shell's backoff.
func FailuresMeanWhatTheyMean(t *testing.T, ad Adapter) {
	s, m := setup(t, ad, 0)
	s.Inject(fakemodel.Fault{Status: 429, RetryAfter: 90 * time.Second})
	_, err := m.Complete(context.Background(), first)
	var hinted interface{ RetryAfter() time.Duration }
	if !errors.As(err, &hinted) || hinted.RetryAfter() != 90*time.Second {
		t.Errorf("a 429 with Retry-After: 90: err = %v, want its wait in the chain", err)
	}
	s.Inject(fakemodel.Fault{Status: 400})
	_, err = m.Complete(context.Background(), first)
	var perm *bandonce.PermanentError
	if !errors.As(err, &perm) {
		t.Errorf("a 400: err = %v, want it Permanent", err)
	}
	if status, ok := ad.Status(err); !ok || status != 400 {
		t.Errorf("a 400: err = %v, want the SDK's error still in the chain", err)
	}
	s.Inject(fakemodel.Fault{Status: 503})
	_, err = m.Complete(context.Background(), first)
	if errors.As(err, &perm) || errors.As(err, &hinted) {
		t.Errorf("a 503: err = %v, want it left to the shell's backoff", err)
	}
}

// Cancel checks that a slow answer is cut off by the caller's context: an
// interrupt cancels the HTTP call in flight.
func Cancel(t *testing.T, ad Adapter) {
	s, m := setup(t, ad, 0)
	s.Inject(fakemodel.Fault{Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := m.Complete(ctx, first); errc <- err }()
	for len(s.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// AnswerPastTheCap checks that an answer past the adapter's cap (its
// default, 32 MiB: the SDK reads every answer whole) fails the call as
// Permanent, naming the cap, instead of filling memory; and that the
// SDK's own retries, which take a body cut short for a dropped
// connection, do not send the call (answered, and billed) again.
func AnswerPastTheCap(t *testing.T, ad Adapter) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"`)
		_, _ = io.Copy(w, io.LimitReader(filler{}, 33<<20))
		_, _ = io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := ad.New(srv.URL, 2).Complete(context.Background(), first)
	var perm *bandonce.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "33554432 bytes, MaxAnswerBytes") {
		t.Errorf("err = %v, want it Permanent, naming the cap", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the model API was called %d times for one call past the cap, want 1", n)
	}
}

// filler reads 'x' for ever.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
