package anthropicmodel_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/anthropicmodel"
	"github.com/band-once/bandonce/agentloop/internal/modeltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var adapter = modeltest.Adapter{
	New: func(url string, retries int) agentloop.Model {
		c := anthropic.NewClient(option.WithBaseURL(url), option.WithAPIKey("test-key"), option.WithMaxRetries(retries))
		return &anthropicmodel.Model{Client: &c, Name: "fake-model"}
	},
	ToolUseStop: "tool_use",
	ToolErrors:  true,
	Status: func(err error) (int, bool) {
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			return 0, false
		}
		return apiErr.StatusCode, true
	},
}

// A turn through the SDK: a tool call, its result (an error) sent back
// paired with the model's id, and the final answer; what the server
// decoded is what the loop asked.
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

// A tool that returned nothing is sent as a tool result without content:
// the Messages API refuses an empty text block, and the turn would fail.
func TestAnEmptyToolResultIsSentWithoutContent(t *testing.T) {
	p, err := anthropicmodel.Params("fake-model", agentloop.Request{MaxTokens: 16, Turns: []agentloop.Turn{
		{Role: agentloop.RoleUser, Text: "archive it"},
		{Role: agentloop.RoleAssistant, ToolCalls: []agentloop.ToolCall{{ID: "toolu_1", Name: "archive", Arguments: json.RawMessage(`{}`)}}},
		{Role: agentloop.RoleTool, ToolCallID: "toolu_1"},
	}})
	require.NoError(t, err)
	body, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"tool_use_id":"toolu_1"`)
	assert.NotContains(t, string(body), `"text":""`)
}
