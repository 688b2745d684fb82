// Command assistant is a Band agent that is a language model in a tool
// loop, built on band-once's package agentloop: a shop's support
// assistant that looks an order up (order_status), refunds it through a
// payment API (refund, the effect that must happen once), tracks the work
// as a task on the room's board, reports a thought, stores what it learned
// as a memory about the sender and answers. Every model call is a
// journaled step and every tool call runs at most once under a key derived
// from its place in the turn, so however often the process is killed and
// the message served again, the order is refunded once, each Band write is
// made once and the sender gets one answer.
//
// Configuration comes from the environment:
//
//	BAND_API_KEY            the agent's API key (required)
//	BAND_BASE_URL           the REST root (default https://app.band.ai/api/v1)
//	BAND_WS_URL             the Phoenix socket (default derived from BAND_BASE_URL)
//	ANTHROPIC_API_KEY       use Claude through the Anthropic SDK (ANTHROPIC_BASE_URL too), or
//	OPENAI_API_KEY          use the OpenAI SDK's Chat Completions (OPENAI_BASE_URL too)
//	ASSISTANT_MODEL         the model's name (default claude-sonnet-5-5, or gpt-5.5)
//	ASSISTANT_PAYMENTS_URL  the payment API's root (required)
//	BANDONCE_LEDGER         the ledger: empty for memory (lost on exit),
//	                        bolt:PATH for a file, or a postgres:// URL
//	BANDONCE_LEASE_TIME     with PostgreSQL, the agent's lease (default 10s)
//
// SIGINT or SIGTERM shut it down gracefully (exit 0). With -fake it plays
// one request against the in-process fake Band, the fake model server
// (agentloop/fakemodel, through the Anthropic SDK) and a fake payment
// API, and prints the room; no key or network is needed.
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/agentloop/openaimodel"
	"github.com/band-once/bandonce/internal/examplekit"
)

func main() {
	// -fake plays one request on the in-process fakes (runFake, in
	// fake.go); otherwise run serves the agent the environment names.
	// -v logs what the shell does to stderr.
	examplekit.Command{Name: "assistant", Fake: runFake, Run: run}.Main()
}

// errNoModel is returned when no model API key is set.
var errNoModel = errors.New("set ANTHROPIC_API_KEY or OPENAI_API_KEY for the model (or run with -fake)")

// modelFrom picks the model adapter the environment names. The SDKs'
// own retries (429 with Retry-After, 5xx) apply within one model call.
func modelFrom(getenv func(string) string) (agentloop.Model, error) {
	name := getenv("ASSISTANT_MODEL")
	if key := getenv("ANTHROPIC_API_KEY"); key != "" {
		var opts []anthropicoption.RequestOption
		if base := getenv("ANTHROPIC_BASE_URL"); base != "" {
			opts = append(opts, anthropicoption.WithBaseURL(base))
		}
		m := anthropicOn("https://api.anthropic.com/", key, opts...)
		if name != "" {
			m.Name = anthropic.Model(name)
		}
		return m, nil
	}
	if key := getenv("OPENAI_API_KEY"); key != "" {
		opts := []openaioption.RequestOption{openaioption.WithAPIKey(key)}
		if base := getenv("OPENAI_BASE_URL"); base != "" {
			opts = append(opts, openaioption.WithBaseURL(base))
		}
		client := openai.NewClient(opts...)
		m := &openaimodel.Model{Client: &client, Name: shared.ChatModelGPT5_5}
		if name != "" {
			m.Name = shared.ChatModel(name)
		}
		return m, nil
	}
	return nil, errNoModel
}

// run serves the agent named by the environment until ctx ends.
func run(ctx context.Context, getenv func(string) string, out io.Writer, logger *slog.Logger) error {
	if getenv("BAND_API_KEY") == "" {
		return errors.New("BAND_API_KEY is not set: export the agent's API key")
	}
	paymentsURL := getenv("ASSISTANT_PAYMENTS_URL")
	if paymentsURL == "" {
		return errors.New("ASSISTANT_PAYMENTS_URL is not set: point it at the payment API (or run with -fake)")
	}
	model, err := modelFrom(getenv)
	if err != nil {
		return err
	}
	// BAND_BASE_URL, BAND_WS_URL and the BANDONCE_ tunables, such as
	// BANDONCE_SETTLE_WINDOW.
	cfg, err := bandonce.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	cfg.Handler = NewLoop(model, &examplekit.PaymentsClient{BaseURL: paymentsURL}).Handler()
	cfg.Logger = logger
	// BANDONCE_LEDGER: empty for memory, bolt:PATH, or a postgres:// URL.
	return examplekit.WithLedger(ctx, getenv("BANDONCE_LEDGER"), getenv, logger, cfg, func(ctx context.Context, cfg bandonce.Config) error {
		return examplekit.Serve(ctx, "assistant", cfg, out)
	})
}
