package pgledger

import (
	"context"
	"fmt"

	"github.com/band-once/bandonce"
)

var _ bandonce.AgentBinder = (*Ledger)(nil)

// BindAgent implements bandonce.AgentBinder. The shell calls it at every
// start with the agent Band says the API key belongs to, so the rows this
// Ledger reads and writes, those of Options.AgentID, are checked against
// Band's answer, not only against the label the caller gave Open. A Ledger
// opened for another agent fails with an error matching
// bandonce.ErrAgentMismatch; nothing is read or written.
func (l *Ledger) BindAgent(_ context.Context, agentID string) error {
	if l.store.opts.AgentID != agentID {
		return fmt.Errorf("pgledger: the ledger in schema %s was opened for agent %q, but the API key is agent %q's "+
			"(set Options.AgentID to the id Band gives the key): %w", l.store.opts.Schema, l.store.opts.AgentID, agentID, bandonce.ErrAgentMismatch)
	}
	return nil
}
