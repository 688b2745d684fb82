package verify

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func TestAnAgentThatTellsTheRoomItGaveUpOnAnAnsweredMessageIsCaught(t *testing.T) {
	liar := Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventError, Content: "I could not answer this message",
			DedupKey: bandonce.NoticeKey(m.ID)}); err != nil {
			return nil, err
		}
		return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
	})
	res := ExactlyOnce(newMockT(t), liar, NoControlSignals(), Schedules(2))
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "was answered, yet its room was told it was given up on")
}
