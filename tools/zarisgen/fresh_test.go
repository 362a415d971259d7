package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The committed gen/ is exactly what `make generate` makes from idl/: the test regenerates
// everything (thrift, zarisgen, mockgen) into a temporary directory and compares every file.
func TestGeneratedCodeIsFresh(t *testing.T) {
	requireThrift(t)
	if testing.Short() {
		t.Skip("runs the whole generation")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	// mockgen names the mocked package by the module around its source; this makes a
	// temporary gen/ resolve to the same import path as the real one.
	const modFile = "go.mod"
	require.NoError(t, os.WriteFile(filepath.Join(tmp, modFile), []byte("module github.com/clustron/zaris-go/gen\n"), 0o644))
	cmd := exec.Command("make", "-s", "generate", "GEN="+tmp)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make generate:\n%s", out)

	committed := listFiles(t, filepath.Join(root, "gen"))
	fresh := listFiles(t, tmp)
	delete(fresh, modFile)
	require.Equal(t, keys(committed), keys(fresh), "gen/ and a fresh generation hold different files: run make generate")
	for name, want := range fresh {
		assert.Equal(t, string(want), string(committed[name]), "gen/%s is stale: run make generate", name)
	}
}

// listFiles reads every file below dir, keyed by its slash-separated path relative to dir.
func listFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	require.NoError(t, err)
	return files
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
