package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// put KEY - reads the value from stdin and put KEY --value-file F from a file, byte for
// byte, including values too long for an argument list (over 128 KiB).
func TestPut_ValueFromStdinOrFile(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 2})
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // 200 KiB
	big = append(big, "\nlast line\n"...)

	o := runZarisStdin(t, env, bytes.NewReader(big), "put", "from-stdin", "-")
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Regexp(t, `^ok version=\d+\n$`, o.stdout)
	assert.Empty(t, o.stderr)
	o = runZaris(t, env, "get", "from-stdin")
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Equal(t, string(big)+"\n", o.stdout, "get prints the value and a newline")

	file := filepath.Join(t.TempDir(), "value")
	require.NoError(t, os.WriteFile(file, big[:150<<10], 0o600))
	o = runZaris(t, env, "put", "from-file", "--value-file", file, "--if-absent")
	require.Equal(t, exitOK, o.code, o.stderr)
	o = runZaris(t, env, "get", "from-file")
	assert.Equal(t, string(big[:150<<10])+"\n", o.stdout)

	o = runZarisStdin(t, env, strings.NewReader(""), "put", "empty", "-")
	require.Equal(t, exitOK, o.code, o.stderr)
	r := jsonResult(t, runZaris(t, env, "--json", "get", "empty"))
	assert.Equal(t, "Ok", r["status"], "an empty stdin is an empty value")
}

// What is wrong with put's value is a usage error (exit 2) that names it, before any call.
func TestPut_ValueErrors(t *testing.T) {
	seeds := "--seeds=" + closedAddr(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "v")
	require.NoError(t, os.WriteFile(file, []byte("v"), 0o600))
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"value and file", []string{seeds, "put", "k", "v", "--value-file", file}, `put: give VALUE or --value-file, not both (got VALUE "v" and --value-file ` + file + ")"},
		{"stdin and file", []string{seeds, "put", "k", "-", "--value-file", file}, "put: give VALUE or --value-file, not both"},
		{"file missing", []string{seeds, "put", "k", "--value-file", filepath.Join(dir, "missing")}, "put: --value-file: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"file is a directory", []string{seeds, "put", "k", "--value-file", dir}, "put: --value-file: read " + dir + ": is a directory"},
		{"no value", []string{seeds, "put", "k"}, "put: missing VALUE (or - to read it from stdin, or --value-file FILE)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, nil, tt.args...)
			assert.Equal(t, exitUsage, o.code, o.stderr)
			assert.Contains(t, o.stderr, tt.stderr)
			assert.Empty(t, o.stdout)
		})
	}
}
