package deps

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLinkedKeepsTheRootsAndWhatIsBelowThem(t *testing.T) {
	linked := Linked(t, "github.com/band-once/bandonce/internal/deps", "os", "strings", "net/http")
	assert.Contains(t, linked, "os")
	assert.Contains(t, linked, "os/exec", "below a root")
	assert.Contains(t, linked, "strings")
	assert.NotContains(t, linked, "net/http", "not linked")
	assert.NotContains(t, linked, "testing", "not a root")
}
