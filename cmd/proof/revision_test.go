package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGitRevisionFollowsHeadThroughLooseAndPackedRefs(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef01234567"
	repo := t.TempDir()
	git := filepath.Join(repo, ".git")
	require.NoError(t, os.MkdirAll(filepath.Join(git, "refs", "heads"), 0o755))
	deep := filepath.Join(repo, "a", "b")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(git, name), []byte(content), 0o644))
	}

	write("HEAD", "ref: refs/heads/main\n")
	write("packed-refs", "# pack-refs with: peeled\n"+id+" refs/heads/main\n")
	assert.Equal(t, id, gitRevision(deep), "packed ref, found from a subdirectory")

	loose := "fedcba9876543210fedcba9876543210fedcba98"
	write("refs/heads/main", loose+"\n")
	assert.Equal(t, loose, gitRevision(repo), "a loose ref wins over the packed one")

	write("HEAD", id+"\n")
	assert.Equal(t, id, gitRevision(repo), "a detached HEAD")

	write("HEAD", "ref: refs/heads/gone\n")
	require.NoError(t, os.Remove(filepath.Join(git, "packed-refs")))
	assert.Empty(t, gitRevision(repo))
	assert.Empty(t, gitRevision(t.TempDir()), "no repository")
}
