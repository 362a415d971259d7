package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// TestVersions_NeverGoBackAfterTheWholeClusterRestarts writes a key three times and keeps
// its version, as a client preparing a compare-and-set would. Then every node and the
// coordinator are killed (etcd keeps its data), everything restarts empty, and the key is
// written again until its version reaches the prepared one (at most as often as before).
// Every version issued after the restart is above every version issued before it, so the
// prepared guarded write answers Conflict instead of landing on another value.
func TestVersions_NeverGoBackAfterTheWholeClusterRestarts(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	r := newRouter(c.Seeds())
	defer r.close()
	key := keyIn(0, 16, "cas")
	put := func(value string, ifMatch *int64) (zaris.KvStatus, int64) {
		t.Helper()
		var version int64
		st, err := r.do(key, nil, func(cl *rawClient) (zaris.KvStatus, int64, error) {
			resp, err := cl.Put(context.Background(), &zaris.PutRequest{Key: key, Value: []byte(value), IfMatchVersion: ifMatch})
			if err != nil {
				return 0, 0, err
			}
			version = resp.Version
			return resp.Status, resp.MapEpoch, nil
		})
		require.NoError(t, err)
		return st, version
	}
	var prepared int64
	for range 3 {
		st, v := put("before", nil)
		require.Equal(t, zaris.KvStatus_Ok, st)
		prepared = v
	}

	nodes := c.Nodes()
	for _, id := range nodes {
		require.NoError(t, c.Kill(id))
	}
	// The coordinator first fails every node over, so that none of its commits is in flight
	// when it is killed.
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner != nil {
				return false
			}
		}
		return true
	}))
	require.NoError(t, c.RestartCoordinator())
	for _, id := range nodes {
		require.NoError(t, c.Restart(ctx, id))
	}
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[0].Owner != nil }))
	r.refresh()

	var after int64
	for i := 0; i < 3 && after < prepared; i++ {
		st, v := put("after", nil)
		require.Equal(t, zaris.KvStatus_Ok, st)
		after = v
	}
	require.Greater(t, after, prepared, "a version issued after the restart is not above those before")
	st, v := put("guarded", &prepared)
	require.Equal(t, zaris.KvStatus_Conflict, st, "the write prepared before the restart landed")
	require.Equal(t, after, v)
}
