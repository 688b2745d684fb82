package verify

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A user's test binary that imports verify links no durable store: the
// prover's bolt and PostgreSQL agents are cmd/proof's alone.
func TestTheVerifierLinksNoDurableStore(t *testing.T) {
	assert.Empty(t, durableStoresLinked(t, "github.com/band-once/bandonce/verify"), "go list -deps ./verify")

	// The check can fail: the prover's command links both stores.
	linked := durableStoresLinked(t, "github.com/band-once/bandonce/cmd/proof")
	for _, pkg := range []string{"github.com/jackc/pgx/v5", "go.etcd.io/bbolt",
		"github.com/band-once/bandonce/pgledger", "github.com/band-once/bandonce/boltledger"} {
		assert.Contains(t, linked, pkg)
	}
}

// durableStoresLinked lists the packages of pgx, bbolt, pgledger and
// boltledger among what pkg's build links.
func durableStoresLinked(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	require.NoError(t, err, "go list -deps %s", pkg)
	var linked []string
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "github.com/jackc/pgx/"), strings.HasPrefix(dep, "go.etcd.io/bbolt"),
			dep == "github.com/band-once/bandonce/pgledger", dep == "github.com/band-once/bandonce/boltledger":
			linked = append(linked, dep)
		}
	}
	return linked
}
