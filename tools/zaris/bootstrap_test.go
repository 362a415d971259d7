package main

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// A node that speaks another protocol or transport closes the connection without an answer;
// the error says so and asks whether the cluster speaks the flags given, instead of a bare
// EOF per seed.
func TestBootstrap_ProtocolMismatchSaysSo(t *testing.T) {
	header := store.StartCluster(t, store.ClusterConfig{Nodes: 2})
	json := store.StartCluster(t, store.ClusterConfig{Nodes: 1, Node: store.NodeConfig{Protocol: store.ProtocolJSON}})
	tests := []struct {
		name  string
		seeds []string
		args  []string
		ask   string
	}{
		{"json against binary nodes", header.Seeds(), []string{"--protocol", "json"}, "does the cluster speak --protocol json, --transport framed, without TLS?"},
		{"buffered json against binary nodes", header.Seeds(), []string{"--protocol", "json", "--transport", "buffered"}, "does the cluster speak --protocol json, --transport buffered, without TLS?"},
		{"binary against a json node", json.Seeds(), nil, "does the cluster speak --protocol binary, --transport framed, without TLS?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, nil, append(tt.args, "--seeds", strings.Join(tt.seeds, ","), "get", "k")...)
			assert.Equal(t, exitGaveUp, o.code)
			assert.Empty(t, o.stdout)
			for _, s := range tt.seeds {
				assert.Contains(t, o.stderr, "seed "+s+": the node closed the connection without answering (EOF)")
			}
			assert.True(t, strings.HasSuffix(o.stderr, ": "+tt.ask+"\n"), "stderr: %s", o.stderr)
			assert.Equal(t, 1, strings.Count(o.stderr, "\n"), "one line: %s", o.stderr)
		})
	}
}

// silentAddr returns the address of a listener that accepts connections and never answers.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// A --timeout that passes before any seed answered says it was the timeout, and how many
// seeds were asked; exit 5, as for any bootstrap that found no map.
func TestBootstrap_TimeoutSaysSo(t *testing.T) {
	silent := silentAddr(t)
	o := runZaris(t, nil, "--seeds", silent+","+closedAddr(t), "--timeout", "200ms", "get", "k")
	assert.Equal(t, exitGaveUp, o.code)
	assert.Contains(t, o.stderr, `zaris: get "k": --timeout 200ms passed before a seed answered with the cluster map (1 of 2 seeds asked): seed `+silent+": ")
	assert.NotContains(t, o.stderr, "no seed reachable")
	assert.Empty(t, o.stdout)

	r := jsonResult(t, runZaris(t, nil, "--json", "--seeds", silent, "--timeout", "200ms", "get", "k"))
	assert.Equal(t, statusGaveUp, r["status"])
	assert.Contains(t, r["error"], "--timeout 200ms passed before a seed answered")
}

// --stats counts the bootstrap: every seed asked, in order, with its outcome and time, and
// the bootstrap's time; also when no seed answered and no call was made.
func TestBootstrap_StatsCountTheSeeds(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 2})
	refused := closedAddr(t)
	seeds := refused + "," + c.Seeds()[0]

	o := runZaris(t, nil, "--seeds", seeds, "--stats", "get", "k")
	require.Equal(t, exitNotFound, o.code, o.stderr)
	lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
	require.Len(t, lines, 6, o.stderr)
	assert.Equal(t, `zaris: get "k": not found`, lines[0])
	assert.Regexp(t, `^bootstrap: seeds asked=2 time=[0-9.]+(µs|ms|s)$`, lines[1])
	assert.Regexp(t, `^  seed `+refused+`: Refused \d+\.\d\dms: dial tcp `+refused+`: connect: connection refused$`, lines[2])
	assert.Regexp(t, `^  seed `+c.Seeds()[0]+`: Ok \d+\.\d\dms$`, lines[3])
	assert.Regexp(t, `^stats: attempts=1 `, lines[4])

	r := jsonResult(t, runZaris(t, nil, "--seeds", seeds, "--stats", "--json", "get", "k"))
	b := r["stats"].(map[string]any)["bootstrap"].(map[string]any)
	assert.Greater(t, b["elapsedMs"], 0.0)
	ss := b["seeds"].([]any)
	require.Len(t, ss, 2)
	assert.Equal(t, map[string]any{"addr": refused, "outcome": "Refused", "error": "dial tcp " + refused + ": connect: connection refused", "durationMs": ss[0].(map[string]any)["durationMs"]}, ss[0])
	assert.Equal(t, "Ok", ss[1].(map[string]any)["outcome"])
	assert.NotContains(t, ss[1], "error")

	o = runZaris(t, nil, "--seeds", refused, "--stats", "get", "k")
	assert.Equal(t, exitGaveUp, o.code)
	lines = strings.Split(strings.TrimSpace(o.stderr), "\n")
	require.Len(t, lines, 3, "no call, no stats line: %s", o.stderr)
	assert.Regexp(t, `^bootstrap: seeds asked=1 time=`, lines[1])
	assert.Regexp(t, `^  seed `+refused+`: Refused `, lines[2])
}
