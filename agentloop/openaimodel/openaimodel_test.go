package openaimodel_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/internal/modeltest"
	"github.com/band-once/bandonce/agentloop/openaimodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var adapter = modeltest.Adapter{
	New: func(url string, retries int) agentloop.Model {
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(retries))
		return &openaimodel.Model{Client: &c, Name: "fake-model"}
	},
	ToolUseStop: "tool_calls",
	ToolErrors:  false, // Chat Completions has no error flag on a tool message
	Status: func(err error) (int, bool) {
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			return 0, false
		}
		return apiErr.StatusCode, true
	},
}

// A turn through the SDK: a tool call, its result sent back paired with
// the model's id, and the final answer; what the server decoded is what
// the loop asked.
func TestATurnRoundTripsThroughTheSDK(t *testing.T) { modeltest.RoundTrip(t, adapter) }

// The SDK's own retries ride out a 429 with Retry-After and a 5xx; the
// answer is the script's step, once.
func TestTheSDKRetriesA429AndA5xx(t *testing.T) { modeltest.Retries(t, adapter) }

// With no retries left the error reaches the loop, which leaves the
// message to be delivered again.
func TestAnErrorPastTheRetriesIsReturned(t *testing.T) { modeltest.ErrorPastTheRetries(t, adapter) }

// A slow answer is cut off by the caller's context: an interrupt cancels
// the HTTP call in flight.
func TestAFailurePastTheRetriesSaysWhatItMeans(t *testing.T) {
	modeltest.FailuresMeanWhatTheyMean(t, adapter)
}

func TestCancellingTheContextEndsTheCallInFlight(t *testing.T) { modeltest.Cancel(t, adapter) }

// An answer past the cap fails the call, Permanent, without filling memory.
func TestAnAnswerPastTheCapIsPermanent(t *testing.T) { modeltest.AnswerPastTheCap(t, adapter) }

// A refusal (no content, the model's words in refusal) is the answer's
// text: dropped, the loop's final answer would be blank.
func TestARefusalIsTheAnswersText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"fake-model","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`)
	}))
	t.Cleanup(srv.Close)
	resp, err := adapter.New(srv.URL, 0).Complete(context.Background(), agentloop.Request{MaxTokens: 16,
		Turns: []agentloop.Turn{{Role: agentloop.RoleUser, Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "I can't help with that." {
		t.Errorf("text %q, want the refusal's words", resp.Text)
	}
}
