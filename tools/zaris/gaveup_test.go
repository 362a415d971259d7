package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store"
)

// unownedSegment starts a cluster of two nodes keeping one copy of each segment, kills the
// owner of segment 0 so that it has no owner left, and returns the cluster, a key in that
// segment and the environment to reach the survivor.
func unownedSegment(t *testing.T) (c *store.Cluster, key string, env map[string]string) {
	t.Helper()
	const segments = 16
	c = store.StartCluster(t, store.ClusterConfig{Nodes: 2, Segments: segments, ReplicationFactor: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owner := *c.Map().Segments[0].Owner
	require.NoError(t, c.Kill(owner))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[0].Owner == nil }))
	require.NoError(t, c.WaitSettled(ctx))
	return c, keyIn(0, segments, "lost"), map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ",")}
}

// TestGaveUp_CallError: a call that runs out of attempts is exit 5, with the bound that
// tripped and every attempt, in the text and in the JSON object.
func TestGaveUp_CallError(t *testing.T) {
	_, key, env := unownedSegment(t)
	disabled := map[string]string{"ZARIS_DISABLE_RETRIES": "true"}
	for k, v := range env {
		disabled[k] = v
	}

	t.Run("text", func(t *testing.T) {
		o := runZaris(t, disabled, "get", key)
		assert.Equal(t, exitGaveUp, o.code)
		assert.Empty(t, o.stdout)
		assert.Regexp(t, `^zaris: get "`+key+`": gave up after 1 of 1 attempts in \S+: partition unavailable.* \(--stats lists every attempt\)\n$`, o.stderr)
	})
	t.Run("retries disabled", func(t *testing.T) {
		o := runZaris(t, disabled, "--json", "--stats", "put", key, "v")
		assert.Equal(t, exitGaveUp, o.code)
		r := jsonResult(t, o)
		assert.Equal(t, statusGaveUp, r["status"])
		assert.EqualValues(t, exitGaveUp, r["exit"])
		assert.Equal(t, "maxAttempts", r["bound"])
		assert.Contains(t, r["error"], "gave up after 1 of 1 attempts")
		assert.Contains(t, r["error"], "attempt 1 no node", "the JSON error keeps the attempt history")
		stats := r["stats"].(map[string]any)
		assert.EqualValues(t, 1, stats["attempts"])
		assert.Equal(t, []any{"PartitionUnavailable"}, stats["statuses"])
	})
	t.Run("default retries", func(t *testing.T) {
		o := runZaris(t, env, "--json", "--stats", "get", key)
		assert.Equal(t, exitGaveUp, o.code)
		r := jsonResult(t, o)
		assert.Equal(t, "maxAttempts", r["bound"])
		stats := r["stats"].(map[string]any)
		assert.EqualValues(t, 3, stats["attempts"], "rule R4: maxAttempts 3")
		assert.Len(t, stats["statuses"], 3)
		assert.Len(t, stats["history"], 3)
		assert.GreaterOrEqual(t, stats["refreshesRequested"], 1.0, "rule R3: no owner is retried after a refresh")
		assert.Greater(t, stats["backoffMs"], 0.0, "rule R5: attempts 2 and 3 wait")
	})
	t.Run("max attempts", func(t *testing.T) {
		o := runZaris(t, env, "--json", "--stats", "--max-attempts", "2", "get", key)
		assert.Equal(t, exitGaveUp, o.code)
		r := jsonResult(t, o)
		assert.Equal(t, "maxAttempts", r["bound"])
		assert.Contains(t, r["error"], "gave up after 2 of 2 attempts")
		assert.EqualValues(t, 2, r["stats"].(map[string]any)["attempts"])
	})
	t.Run("retries disabled beats max attempts", func(t *testing.T) {
		o := runZaris(t, disabled, "--json", "--stats", "--max-attempts", "5", "get", key)
		assert.Equal(t, exitGaveUp, o.code)
		r := jsonResult(t, o)
		assert.Contains(t, r["error"], "gave up after 1 of 1 attempts")
		assert.EqualValues(t, 1, r["stats"].(map[string]any)["attempts"])
	})
	t.Run("stats text", func(t *testing.T) {
		o := runZaris(t, disabled, "incr", key, "--stats")
		assert.Equal(t, exitGaveUp, o.code)
		assert.Contains(t, o.stderr, "stats: attempts=1 refreshes requested=")
		assert.Contains(t, o.stderr, "statuses=PartitionUnavailable")
		assert.Contains(t, o.stderr, "  attempt 1: no node map epoch ")
	})
}

// TestGaveUp_Migrating: a write to a segment held in its cut-over is answered Migrating (a
// read Unavailable); with ZARIS_DISABLE_RETRIES=true that single answer ends the call (exit
// 5) and --stats shows it.
func TestGaveUp_Migrating(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const seg = 3
	key := keyIn(seg, 16, "mig")
	env := map[string]string{"ZARIS_SEEDS": strings.Join(c.Seeds(), ","), "ZARIS_DISABLE_RETRIES": "true"}
	require.Equal(t, exitOK, runZaris(t, env, "put", key, "before").code)

	s := c.Map().Segments[seg]
	var to int32
	for _, id := range c.Nodes() {
		if id != *s.Owner && !containsID(s.Replicas, id) {
			to = id
		}
	}
	require.NotZero(t, to)
	release := c.HoldChurn()
	defer release()
	done := make(chan error, 1)
	go func() { done <- c.MigrateSegment(ctx, seg, to) }()
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[seg].Migrating }))

	var o runOutput
	want := "before"
	require.Eventually(t, func() bool {
		o = runZaris(t, env, "put", key, "during", "--stats")
		if o.code == exitOK {
			want = "during" // written while the copy ran, before the cut-over
		}
		return o.code != exitOK
	}, 10*time.Second, 10*time.Millisecond, "the cut-over never answered Migrating")
	assert.Equal(t, exitGaveUp, o.code, o.stderr)
	assert.Contains(t, o.stderr, "gave up after 1 of 1 attempts")
	assert.Contains(t, o.stderr, "statuses=Migrating")
	assert.Contains(t, o.stderr, "[retry]")

	// The cut-over revoked the old owner's right to serve: reads are not served either.
	get := runZaris(t, env, "get", key, "--stats")
	assert.Equal(t, exitGaveUp, get.code, "a read was served during the cut-over: %s", get.stdout)
	assert.Contains(t, get.stderr, "Unavailable")

	release()
	require.NoError(t, <-done)
	// With retries on, a seed's stale map (Moved) is refreshed away.
	delete(env, "ZARIS_DISABLE_RETRIES")
	get = runZaris(t, env, "get", key)
	assert.Equal(t, exitOK, get.code, get.stderr)
	assert.Equal(t, want+"\n", get.stdout)
	put := runZaris(t, env, "put", key, "after")
	assert.Equal(t, exitOK, put.code, put.stderr)
}

// TestGaveUp_Timeout: --timeout bounds the call; one that cannot be met is exit 5.
func TestGaveUp_Timeout(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 1})
	o := runZaris(t, nil, "--seeds", c.Seeds()[0], "--timeout", "1ns", "get", "k")
	assert.Equal(t, exitGaveUp, o.code, o.stderr)
	assert.NotEmpty(t, o.stderr)
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
