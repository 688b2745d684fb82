package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// gitRevision reads the commit checked out in the repository around dir,
// from .git itself, for receipts of binaries built without a VCS stamp
// (go run with -buildvcs=false). It returns "" when it cannot tell.
func gitRevision(dir string) string {
	for {
		gitDir := filepath.Join(dir, ".git")
		if fi, err := os.Stat(gitDir); err == nil && fi.IsDir() {
			return resolveHead(gitDir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// resolveHead follows HEAD to a commit id through a loose or packed ref.
func resolveHead(gitDir string) string {
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !isRef {
		return commitID(ref)
	}
	if loose, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref))); err == nil {
		return commitID(strings.TrimSpace(string(loose)))
	}
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id, name, ok := strings.Cut(sc.Text(), " "); ok && name == ref {
			return commitID(id)
		}
	}
	return ""
}

// commitID returns s if it looks like a hex commit id, else "".
func commitID(s string) string {
	if len(s) != 40 && len(s) != 64 {
		return ""
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return s
}
