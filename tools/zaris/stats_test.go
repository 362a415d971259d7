package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// TestStats: --stats reports one attempt, no refresh and the Ok of an undisturbed call, on
// stderr in text mode (stdout stays the value alone) and inside the --json object.
func TestStats(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}
	require.Equal(t, exitOK, runZaris(t, env, "put", "s", "value").code)

	t.Run("text", func(t *testing.T) {
		o := runZaris(t, env, "get", "s", "--stats")
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.Equal(t, "value\n", o.stdout)
		lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
		require.Len(t, lines, 4, o.stderr)
		assert.Regexp(t, `^bootstrap: seeds asked=1 time=`, lines[0])
		assert.Regexp(t, `^  seed 127\.0\.0\.1:\d+: Ok \d+\.\d\dms$`, lines[1])
		assert.Equal(t, "stats: attempts=1 refreshes requested=0 performed=0 backoff=0s statuses=Ok", lines[2])
		assert.Regexp(t, `^  attempt 1: node \d+ \(127\.0\.0\.1:\d+\) map epoch \d+: Ok \(node epoch \d+\) \[answer\] \d+\.\d\dms$`, lines[3])
	})
	t.Run("answers count too", func(t *testing.T) {
		o := runZaris(t, env, "get", "absent", "--stats")
		assert.Equal(t, exitNotFound, o.code)
		assert.Contains(t, o.stderr, "statuses=NotFound")
	})
	t.Run("json", func(t *testing.T) {
		o := runZaris(t, env, "--stats", "--json", "put", "s", "again")
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.Empty(t, o.stderr)
		r := jsonResult(t, o)
		stats, ok := r["stats"].(map[string]any)
		require.True(t, ok, "stats: %v", r["stats"])
		assert.EqualValues(t, 1, stats["attempts"])
		assert.EqualValues(t, 0, stats["refreshesRequested"])
		assert.EqualValues(t, 0, stats["refreshesPerformed"])
		assert.EqualValues(t, 0, stats["backoffMs"])
		assert.Equal(t, []any{"Ok"}, stats["statuses"])
		history := stats["history"].([]any)
		require.Len(t, history, 1)
		a := history[0].(map[string]any)
		assert.EqualValues(t, 1, a["n"])
		assert.Equal(t, "Ok", a["outcome"])
		assert.Equal(t, "answer", a["class"])
		assert.Contains(t, c.Seeds(), a["addr"])
		assert.Equal(t, r["mapEpoch"], a["answerEpoch"])
		assert.NotContains(t, a, "error")
	})
	t.Run("json without stats", func(t *testing.T) {
		r := jsonResult(t, runZaris(t, env, "--json", "get", "s"))
		assert.NotContains(t, r, "stats")
	})
}
