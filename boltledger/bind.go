package boltledger

import (
	"context"
	"fmt"

	"github.com/band-once/bandonce"
	bolt "go.etcd.io/bbolt"
)

var _ bandonce.AgentBinder = (*Ledger)(nil)

// BindAgent implements bandonce.AgentBinder. The shell calls it at every
// start with the agent Band says the API key belongs to, so the file's
// agent is checked against Band's answer, not only against the label
// Options.AgentID gave Open. A file made for another agent fails with an
// error matching both ErrAgentMismatch and bandonce.ErrAgentMismatch, and
// is left as it is.
func (l *Ledger) BindAgent(ctx context.Context, agentID string) error {
	var owner string
	err := l.view(ctx, "read the ledger's agent", func(tx *bolt.Tx) error {
		owner = string(tx.Bucket(metaBucket).Get(agentField))
		return nil
	})
	if err != nil {
		return err
	}
	if owner != agentID {
		return &agentMismatch{path: l.path, owner: owner, agent: agentID}
	}
	return nil
}

// agentMismatch is BindAgent's refusal.
type agentMismatch struct{ path, owner, agent string }

func (e *agentMismatch) Error() string {
	return fmt.Sprintf("boltledger: ledger %s belongs to agent %q, but the API key is agent %q's: "+
		"give each agent its own ledger file (and Options.AgentID the id Band gives the key)", e.path, e.owner, e.agent)
}

// Is matches this package's sentinel and the shell's.
func (e *agentMismatch) Is(target error) bool {
	return target == ErrAgentMismatch || target == bandonce.ErrAgentMismatch
}
