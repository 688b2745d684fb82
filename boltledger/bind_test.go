package boltledger_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
	"github.com/band-once/bandonce/fakeband"
)

// The issue as it was found: Options.AgentID is a label the caller makes
// up, and a wrong one was accepted. Now the shell binds the ledger to the
// agent Band names at start: a file of another agent fails Run before any
// room is served, and says which agents and which file.
func TestRunWithAnotherAgentsLedgerFailsAtStart(t *testing.T) {
	band := fakeband.New(fakeband.Options{})
	t.Cleanup(func() { _ = band.Close() })
	mine, theirs, ada := band.AddAgent("mine"), band.AddAgent("theirs"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, mine.ID)
	_, err := band.Say(room.ID, ada.ID, "hello", mine.ID)
	require.NoError(t, err)

	path := filepath.Join(t.TempDir(), "theirs.ledger")
	ledger, err := boltledger.Open(path, boltledger.Options{AgentID: theirs.ID})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ledger.Close() })

	shell, err := bandonce.New(bandonce.Config{
		APIKey: mine.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), DisableSocket: true,
		Logger:  slog.New(slog.DiscardHandler),
		Ledger:  ledger,
		Handler: func(context.Context, *bandonce.Message) (*bandonce.Reply, error) { return nil, nil },
	})
	require.NoError(t, err)
	err = shell.Run(context.Background())
	require.ErrorIs(t, err, boltledger.ErrAgentMismatch)
	require.ErrorIs(t, err, bandonce.ErrAgentMismatch)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), theirs.ID, "whose the file is")
	assert.Contains(t, err.Error(), mine.ID, "whose the key is")
	assert.Zero(t, band.Requests()[fakeband.EndpointNext], "no room served")
	assert.Empty(t, band.Marks(mine.ID, mustFirst(t, band, room.ID)), "the message waits, untouched")

	// The right agent's ledger serves.
	right, err := boltledger.Open(filepath.Join(t.TempDir(), "mine.ledger"), boltledger.Options{AgentID: mine.ID})
	require.NoError(t, err)
	t.Cleanup(func() { _ = right.Close() })
	require.NoError(t, right.BindAgent(context.Background(), mine.ID))
	shell, err = bandonce.New(bandonce.Config{
		APIKey: mine.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), DisableSocket: true,
		Logger:  slog.New(slog.DiscardHandler),
		Ledger:  right,
		Handler: func(context.Context, *bandonce.Message) (*bandonce.Reply, error) { return nil, nil },
	})
	require.NoError(t, err)
	res, err := shell.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Outcomes[bandonce.NoReply])
}

func mustFirst(t *testing.T, band *fakeband.Band, roomID string) string {
	t.Helper()
	posts := band.Posts(roomID)
	require.NotEmpty(t, posts)
	return posts[0].ID
}
