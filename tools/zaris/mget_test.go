package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// mput and mget against an in-process cluster: one line per item in the order given,
// answers per item, --json with one object per item and --stats with the batch's cost.
func TestCommands_MputMget(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}

	o := runZaris(t, env, "mput", "a=1", "b=two", "c=x=y", "a=again")
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Regexp(t, regexp.MustCompile(`^a ok version=\d+\nb ok version=\d+\nc ok version=\d+\na ok version=\d+\n$`), o.stdout)
	assert.Empty(t, o.stderr)

	o = runZaris(t, env, "mget", "a", "missing", "c", "b", "")
	assert.Equal(t, exitOK, o.code, "every item got an answer")
	assert.Equal(t, "a=again\nc=x=y\nb=two\n", o.stdout)
	assert.Contains(t, o.stderr, `zaris: mget "missing": not found`)
	assert.Contains(t, o.stderr, `zaris: mget "": invalid request`)

	o = runZaris(t, env, "mget", "--json", "--stats", "b", "missing")
	m := jsonResult(t, o)
	assert.Equal(t, "mget", m["command"])
	assert.Equal(t, "Ok", m["status"])
	items, ok := m["items"].([]any)
	require.True(t, ok, "items: %v", m["items"])
	require.Len(t, items, 2)
	assert.Equal(t, "two", items[0].(map[string]any)["value"])
	assert.Equal(t, "NotFound", items[1].(map[string]any)["status"])
	for _, it := range items {
		for k, v := range it.(map[string]any) {
			assert.NotContains(t, []any{"", nil}, v, "item field %q is empty: %v", k, it)
		}
	}
	stats := m["stats"].(map[string]any)
	batch := stats["batch"].(map[string]any)
	assert.Equal(t, 1.0, batch["rounds"])
	assert.GreaterOrEqual(t, batch["subRequests"], 1.0)
	assert.Equal(t, 0.0, batch["itemsRetried"])

	o = runZaris(t, env, "mget", "--stats", "a")
	assert.Contains(t, o.stderr, "batch: rounds=1 sub-requests=1 items retried=0")

	o = runZaris(t, env, "mput", "novalue")
	assert.Equal(t, exitUsage, o.code)
	assert.Contains(t, o.stderr, `mput: "novalue" is not KEY=VALUE`)
	o = runZaris(t, env, "mget")
	assert.Equal(t, exitUsage, o.code)
}

// An mget whose cluster is gone gives up on every item: exit 5, one line per item.
func TestCommands_MgetGivesUp(t *testing.T) {
	env := map[string]string{"ZARIS_SEEDS": closedAddr(t)}
	o := runZaris(t, env, "mget", "a", "b")
	assert.Equal(t, exitGaveUp, o.code)
}
