// Package deps reads what a package's build links, for the tests that
// hold a binary to linking only what it needs.
package deps

import (
	"os/exec"
	"strings"
	"testing"
)

// Linked lists the packages pkg's build links (go list -deps) that are
// one of roots or below one of them ("testing" also matches
// "testing/synctest"). It fails t when go list does.
func Linked(t testing.TB, pkg string, roots ...string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var linked []string
	for _, dep := range strings.Fields(string(out)) {
		for _, root := range roots {
			if dep == root || strings.HasPrefix(dep, root+"/") {
				linked = append(linked, dep)
				break
			}
		}
	}
	return linked
}
