package pgledger

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A Store opened with a wrong Options.AgentID (another agent's id, or a
// label made up) leads, but the shell on it fails at start: Band names
// the key's agent, and the ledger's rows are another's.
func TestAShellOnAnotherAgentsLedgerFailsAtStart(t *testing.T) {
	db := newTestDB(t)
	b := newBand(t)
	ids := b.backlog(t, 1)
	s := db.open(t, db.opts("agent-someone-else", "h1"))
	err := s.RunLeader(context.Background(), func(ctx context.Context, l *Ledger) error {
		shell, err := bandonce.New(bandonce.Config{
			APIKey: b.agent.Key, BaseURL: b.BaseURL(), HTTPClient: b.HTTPClient(), DisableSocket: true,
			Handler: slowEcho, Ledger: l, Logger: quiet, ShutdownTimeout: 100 * time.Millisecond,
		})
		if err != nil {
			return err
		}
		return shell.Run(ctx)
	})
	require.ErrorIs(t, err, bandonce.ErrAgentMismatch)
	assert.Contains(t, err.Error(), `"agent-someone-else"`)
	assert.Contains(t, err.Error(), b.agent.ID)
	assert.Zero(t, b.Requests()[fakeband.EndpointNext], "no room served")
	assert.Empty(t, b.Marks(b.agent.ID, ids[0]))

	// The right id binds.
	right := db.open(t, db.opts(b.agent.ID, "h2"))
	l, tm := lead(t, right)
	require.NoError(t, tm.ledger.BindAgent(context.Background(), b.agent.ID))
	l.stop()
	require.NoError(t, l.wait(t))
}
