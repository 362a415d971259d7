package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// A command run just after a node died, whose key that node owned, still succeeds: the
// client's first map is stale, its bootstrap opens no debounce window, so the refresh before
// the second attempt finds the failed-over owner (the store fails a killed node over at once).
func TestCommandJustAfterAKill(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	m := c.Map()
	victim := m.Segments[0].GetOwner()
	key := keyIn(0, m.SegmentCount, "after-kill")
	seeds := strings.Join(c.Seeds(), ",")
	env := map[string]string{}

	o := runZaris(t, env, "--seeds", seeds, "put", key, "v1")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.NoError(t, c.Kill(victim))

	o = runZaris(t, env, "--seeds", seeds, "--stats", "get", key)
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Equal(t, "v1", strings.TrimSpace(o.stdout))
	assert.Contains(t, o.stderr, "attempts", "the stats show the retry")
}
