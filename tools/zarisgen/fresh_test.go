package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The committed gen/ and tools/gen/ are exactly what `make generate` makes from idl/ and
// tools/idl/: the test regenerates everything (thrift, zarisgen, mockgen) into temporary
// directories and compares every file.
func TestGeneratedCodeIsFresh(t *testing.T) {
	requireThrift(t)
	if testing.Short() {
		t.Skip("runs the whole generation")
	}
	root := repoRoot(t)
	tmp, toolsTmp := t.TempDir(), t.TempDir()
	// mockgen names the mocked package by the module around its source; this makes a
	// temporary gen/ resolve to the same import path as the real one.
	const modFile = "go.mod"
	require.NoError(t, os.WriteFile(filepath.Join(tmp, modFile), []byte("module github.com/clustron/zaris-go/gen\n"), 0o644))
	cmd := exec.Command("make", "-s", "generate", "GEN="+tmp, "TOOLS_GEN="+toolsTmp)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make generate:\n%s", out)

	for _, dir := range []struct{ committed, fresh string }{{"gen", tmp}, {"tools/gen", toolsTmp}} {
		committed := listFiles(t, filepath.Join(root, dir.committed))
		fresh := listFiles(t, dir.fresh)
		delete(fresh, modFile)
		require.Equal(t, keys(committed), keys(fresh), "%s/ and a fresh generation hold different files: run make generate", dir.committed)
		for name, want := range fresh {
			assert.Equal(t, string(want), string(committed[name]), "%s/%s is stale: run make generate", dir.committed, name)
		}
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

// A new status is an IDL edit plus make generate, and a failed make generate leaves gen/ and
// tools/gen/ as they were: in a scratch copy of the module, a value added to KvStatus but left
// unclassified fails the run naming it and its line, after the Thrift compiler has run, with
// both byte for byte unchanged; named in zaris.retry, it regenerates, builds, and is retried.
func TestGenerate_NewStatus(t *testing.T) {
	requireThrift(t)
	if testing.Short() {
		t.Skip("regenerates and builds a copy of the module")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	copyModule(t, root, dir, "tools/gen")
	idlPath := filepath.Join(dir, "idl", "zaris.thrift")
	idl, err := os.ReadFile(idlPath)
	require.NoError(t, err)
	const last, retry = "  InvalidRequest = 8,\n", `zaris.retry        = "Unavailable,Migrating"`
	require.Contains(t, string(idl), last)
	require.Contains(t, string(idl), retry)
	unclassified := strings.Replace(string(idl), last, last+"  Throttled = 9,\n", 1)
	require.NoError(t, os.WriteFile(idlPath, []byte(unclassified), 0o644))
	line := strings.Count(unclassified[:strings.Index(unclassified, "  Throttled")], "\n") + 1
	generated := []string{"gen", "tools/gen"}
	before := map[string]map[string][]byte{}
	for _, g := range generated {
		before[g] = listFiles(t, filepath.Join(dir, g))
	}

	run := func(args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("make", "-s", "generate")
	require.Error(t, err, "make generate must fail on an unclassified status:\n%s", out)
	assert.Contains(t, out, fmt.Sprintf("idl/zaris.thrift:%d: enum KvStatus: value Throttled: not classified", line))
	for _, g := range generated {
		after := listFiles(t, filepath.Join(dir, g))
		require.Equal(t, keys(before[g]), keys(after), "a failed make generate changed the files under %s/", g)
		for name, want := range before[g] {
			assert.True(t, bytes.Equal(want, after[name]), "a failed make generate changed %s/%s", g, name)
		}
	}

	classified := strings.Replace(unclassified, retry, `zaris.retry        = "Unavailable,Migrating,Throttled"`, 1)
	require.NoError(t, os.WriteFile(idlPath, []byte(classified), 0o644))
	out, err = run("make", "-s", "generate")
	require.NoError(t, err, "make generate:\n%s", out)
	gen, err := os.ReadFile(filepath.Join(dir, "gen", "zarisclient", outputFile))
	require.NoError(t, err)
	assert.Contains(t, string(gen), `{Value: int64(zaris.KvStatus_Throttled), Name: "Throttled", Class: runtime.Retry},`)
	// The default stack retries Throttled like Unavailable: after backoff, without a refresh.
	const throttledTest = `package middleware_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

func TestThrottledIsRetried(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Throttled), mwt.Answer(zaris.KvStatus_Ok)})
	call := zt.PutCall("k", "v")
	resp, err := s.do(call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Equal(t, []runtime.Class{runtime.Retry, runtime.Answer}, classes(call))
	assert.Equal(t, []time.Duration{100 * time.Millisecond}, s.clock.Sleeps())
	assert.Empty(t, s.refresher.Requests())
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "middleware", "throttled_test.go"), []byte(throttledTest), 0o644))
	out, err = run("go", "test", "-count=1", "-run", "TestThrottledIsRetried", "./middleware")
	require.NoError(t, err, "the copy builds and retries Throttled:\n%s", out)
	assert.Contains(t, out, "ok")
}
