package examplekit

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A request played on the stage is served by the handler, refunds once
// through the payment API, and the transcript prints the room in order
// and the refunds.
func TestAPlayedRequestIsPrintedInOrder(t *testing.T) {
	stage := NewStage(3, "bot", "ada")
	defer stage.Close()
	pay := &PaymentsClient{BaseURL: stage.PaymentsURL}
	handler := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		receipt, err := m.Step(ctx, "refund", func(ctx context.Context, key string) ([]byte, error) {
			id, err := pay.Refund(ctx, key, "order-1")
			return []byte(id), err
		})
		if err != nil {
			return nil, err
		}
		return &bandonce.Reply{Content: "refunded, receipt " + string(receipt), Mentions: []string{m.SenderID}}, nil
	}
	require.NoError(t, stage.Play(t.Context(), handler, slog.New(slog.DiscardHandler), "refund order-1", 10*time.Second))
	var out bytes.Buffer
	tr := stage.Transcript(&out, 5)
	tr.Room()
	tr.Refunds()
	assert.Equal(t, "ada:  @bot refund order-1\nbot:  @ada refunded, receipt re_1\npayments: order-1 refunded 1 time(s)\n", out.String())
}
