package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store"
)

// step is one run of zaris in a scripted session against a cluster, and what it must give.
// Versions grow per segment, not per key, so a step can save the version it printed under a
// name, and later steps refer to it as {name} in their arguments and expectations.
type step struct {
	name   string
	args   []string
	code   int
	stdout string // exact stdout after expansion; with save, "ok version=N\n" is expected
	stderr string // substring of stderr after expansion; "" means stderr must be empty
	save   string // save the printed version under this name
}

var versionLine = regexp.MustCompile(`^ok version=(\d+)\n$`)

// TestCommands runs every command through every answer against one in-process cluster, in
// order: each step sees the keys the steps before it wrote.
func TestCommands(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}

	steps := []step{
		{name: "get missing", args: []string{"get", "k"}, code: exitNotFound, stderr: `zaris: get "k": not found`},
		{name: "put", args: []string{"put", "k", "v1"}, save: "v1"},
		{name: "get", args: []string{"get", "k"}, stdout: "v1\n"},
		{name: "put again", args: []string{"put", "k", "v2"}, save: "v2"},
		{name: "put if-version stale", args: []string{"put", "k", "v3", "--if-version", "{v1}"}, code: exitConflict,
			stderr: `zaris: put "k": conflict: the key's current version is {v2}`},
		{name: "put if-version current", args: []string{"put", "--if-version", "{v2}", "k", "v3"}, save: "v3"},
		{name: "put if-absent present", args: []string{"put", "k", "v4", "--if-absent"}, code: exitConflict,
			stderr: "conflict: the key's current version is {v3}"},
		{name: "get after conflicts", args: []string{"get", "k"}, stdout: "v3\n"},
		{name: "put if-absent absent", args: []string{"put", "fresh", "f", "--if-absent"}, save: "fresh"},
		{name: "put if-version on a missing key", args: []string{"put", "nokey", "x", "--if-version", "1"}, code: exitConflict,
			stderr: `put "nokey": conflict`},
		{name: "delete if-version stale", args: []string{"delete", "k", "--if-version", "{v2}"}, code: exitConflict,
			stderr: `delete "k": conflict: the key's current version is {v3}`},
		{name: "delete if-version current", args: []string{"delete", "k", "--if-version", "{v3}"}, stdout: "ok version={v3}\n"},
		{name: "get deleted", args: []string{"get", "k"}, code: exitNotFound, stderr: "not found"},
		{name: "delete missing", args: []string{"delete", "k"}, code: exitNotFound, stderr: `zaris: delete "k": not found`},
		{name: "delete", args: []string{"delete", "fresh"}, stdout: "ok version={fresh}\n"},
		{name: "incr new key", args: []string{"incr", "n"}, stdout: "1\n"},
		{name: "incr by delta", args: []string{"incr", "n", "41"}, stdout: "42\n"},
		{name: "incr negative", args: []string{"incr", "n", "-50"}, stdout: "-8\n"},
		{name: "get counter", args: []string{"get", "n"}, stdout: "-8\n"},
		{name: "put empty key", args: []string{"put", "", "v"}, code: exitInvalid, stderr: `zaris: put "": invalid request`},
		{name: "get empty key", args: []string{"get", ""}, code: exitInvalid, stderr: "invalid request"},
		{name: "put text", args: []string{"put", "text", "not a number"}, save: "text"},
		{name: "incr non-number", args: []string{"incr", "text"}, code: exitInvalid, stderr: `zaris: incr "text": invalid request`},
		{name: "put value with dashes", args: []string{"put", "--", "dash", "-x y"}, save: "dash"},
		{name: "get value with dashes", args: []string{"get", "dash"}, stdout: "-x y\n"},
		{name: "flags between arguments", args: []string{"put", "dash", "--if-version", "{dash}", "z"}, save: "dash2"},
	}
	runSteps(t, env, steps)

	t.Run("map", func(t *testing.T) {
		o := runZaris(t, env, "map")
		require.Equal(t, exitOK, o.code, o.stderr)
		m := c.Map()
		assert.Contains(t, o.stdout, "segments, 3 nodes")
		assert.Contains(t, o.stdout, "NODE  ADDRESS")
		assert.Contains(t, o.stdout, "SEGMENT  OWNER  REPLICAS  STATE")
		for _, addr := range c.Seeds() {
			assert.Contains(t, o.stdout, addr)
		}
		lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
		for _, l := range lines {
			assert.Equal(t, strings.TrimRight(l, " "), l, "no trailing spaces")
		}
		// summary, blank, node header, nodes, blank, segment header, segments
		assert.Len(t, lines, 1+1+1+3+1+1+int(m.SegmentCount))
	})
}

// TestCommands_JSON checks the --json object of every command and answer.
func TestCommands_JSON(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}

	tests := []struct {
		name string
		args []string
		code int
		want map[string]any // fields that must be there, with these values
		none []string       // fields that must not be there
	}{
		{"get missing", []string{"get", "j"}, exitNotFound,
			map[string]any{"command": "get", "key": "j", "status": "NotFound", "exit": 3.0, "error": "not found"},
			[]string{"value", "version", "stats", "bound"}},
		{"put", []string{"put", "j", "v1"}, exitOK,
			map[string]any{"command": "put", "key": "j", "status": "Ok", "exit": 0.0},
			[]string{"value", "error"}},
		{"get", []string{"get", "j"}, exitOK,
			map[string]any{"command": "get", "status": "Ok", "value": "v1"},
			[]string{"valueBase64", "error"}},
		{"get binary", []string{"get", "bin"}, exitOK,
			map[string]any{"status": "Ok", "valueBase64": "/w=="}, []string{"value"}},
		{"conflict", []string{"put", "j", "v2", "--if-absent"}, exitConflict,
			map[string]any{"status": "Conflict", "exit": 4.0}, []string{"value"}},
		{"incr", []string{"incr", "cnt", "7"}, exitOK,
			map[string]any{"command": "incr", "status": "Ok", "value": 7.0}, nil},
		{"invalid", []string{"incr", "j"}, exitInvalid,
			map[string]any{"status": "InvalidRequest", "exit": 6.0}, []string{"value"}},
		{"delete", []string{"delete", "j"}, exitOK,
			map[string]any{"command": "delete", "status": "Ok"}, nil},
	}
	// A value that is not UTF-8 cannot come from the command line; write it directly.
	require.Equal(t, exitOK, runZaris(t, env, "put", "bin", "x").code)
	putRaw(t, c, "bin", []byte{0xff})

	var jVersion any
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, env, append([]string{"--json"}, tt.args...)...)
			assert.Equal(t, tt.code, o.code, o.stderr)
			r := jsonResult(t, o)
			for k, v := range tt.want {
				assert.Equal(t, v, r[k], "field %s", k)
			}
			for _, k := range tt.none {
				assert.NotContains(t, r, k)
			}
			assert.Greater(t, r["mapEpoch"], 0.0, "every answer carries the node's map epoch")
			if tt.code == exitOK || tt.code == exitConflict {
				assert.Greater(t, r["version"], 0.0)
			} else {
				assert.NotContains(t, r, "version")
			}
			// The version of j is the same from its put to its delete.
			if r["key"] == "j" && r["version"] != nil {
				if jVersion == nil {
					jVersion = r["version"]
				}
				assert.Equal(t, jVersion, r["version"])
			}
			if tt.code == exitOK {
				assert.Empty(t, o.stderr)
			} else {
				assert.Contains(t, o.stderr, "zaris: ", "the reason goes to stderr too")
			}
		})
	}

	t.Run("map", func(t *testing.T) {
		o := runZaris(t, env, "map", "--json")
		require.Equal(t, exitOK, o.code, o.stderr)
		r := jsonResult(t, o)
		assert.Equal(t, "map", r["command"])
		assert.Equal(t, "Ok", r["status"])
		m, ok := r["map"].(map[string]any)
		require.True(t, ok, "map object: %v", r["map"])
		assert.Equal(t, r["mapEpoch"], m["epoch"])
		assert.EqualValues(t, store.DefaultSegments, m["segmentCount"])
		assert.Len(t, m["nodes"], 3)
		assert.Len(t, m["segments"], store.DefaultSegments)
	})
}

// putRaw writes key=value through the client, for values the command line cannot carry.
func putRaw(t *testing.T, c *store.Cluster, key string, value []byte) {
	t.Helper()
	cl := newTestSession(t, c)
	resp, err := cl.kv.Put(context.Background(), &zaris.PutRequest{Key: []byte(key), Value: value})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, resp.Status)
}

// newTestSession connects a session to c the way the commands do.
func newTestSession(t *testing.T, c *store.Cluster) *session {
	t.Helper()
	cl := newCLI(nil, nil, func(string) string { return "" })
	cl.seeds = strings.Join(c.Seeds(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.connect(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// runSteps runs steps in order, each as a subtest, saving and expanding versions.
func runSteps(t *testing.T, env map[string]string, steps []step) {
	t.Helper()
	saved := map[string]string{}
	expand := func(s string) string {
		for k, v := range saved {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return s
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			args := make([]string, len(s.args))
			for i, a := range s.args {
				args[i] = expand(a)
			}
			o := runZaris(t, env, args...)
			assert.Equal(t, s.code, o.code, "stdout: %q stderr: %q", o.stdout, o.stderr)
			if s.save != "" {
				m := versionLine.FindStringSubmatch(o.stdout)
				require.NotNil(t, m, "stdout %q", o.stdout)
				saved[s.save] = m[1]
			} else {
				assert.Equal(t, expand(s.stdout), o.stdout)
			}
			if s.stderr == "" {
				assert.Empty(t, o.stderr)
			} else {
				assert.Contains(t, o.stderr, expand(s.stderr))
			}
		})
	}
}
