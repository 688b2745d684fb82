package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce/internal/deps"
)

// durableStores are pgx, bbolt, and the ledgers built on them.
var durableStores = []string{"github.com/jackc/pgx", "go.etcd.io/bbolt",
	"github.com/band-once/bandonce/pgledger", "github.com/band-once/bandonce/boltledger"}

// A user's test binary that imports verify links no durable store: the
// prover's bolt and PostgreSQL agents are cmd/proof's alone.
func TestTheVerifierLinksNoDurableStore(t *testing.T) {
	assert.Empty(t, deps.Linked(t, "github.com/band-once/bandonce/verify", durableStores...), "go list -deps ./verify")

	// The check can fail: the prover's command links both stores.
	linked := deps.Linked(t, "github.com/band-once/bandonce/cmd/proof", durableStores...)
	for _, pkg := range []string{"github.com/jackc/pgx/v5", "go.etcd.io/bbolt",
		"github.com/band-once/bandonce/pgledger", "github.com/band-once/bandonce/boltledger"} {
		assert.Contains(t, linked, pkg)
	}
}
