package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// Each churn runs under concurrent writes through a client that retries churn statuses; every
// acknowledged write must read back afterwards and the map epoch must only grow.

func TestFailover_KilledNodeLosesNoAckedWrite(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	ep := watchEpochs(c)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)

	require.NoError(t, c.Kill(2))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 2, false))
	w.waitAcked(t, 50)
	require.NoError(t, c.WaitSettled(ctx))
	for _, s := range c.Map().Segments {
		require.NotNil(t, s.Owner, "segment %d has no owner after failover", s.ID)
		require.NotEqual(t, int32(2), *s.Owner)
	}
	w.finish(t)
	ep.finish(t)
}

func TestFailback_ReturningNodeCatchesUpThenTakesItsSegmentsBack(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)
	require.NoError(t, c.Kill(1))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 1, false))
	w.waitAcked(t, 50)

	ep := watchEpochs(c)
	require.NoError(t, c.Restart(ctx, 1))
	require.NoError(t, c.WaitSettled(ctx))
	w.waitAcked(t, 50)
	require.NoError(t, c.Failback(ctx, 1))
	w.waitAcked(t, 50)
	require.NoError(t, c.WaitSettled(ctx))
	owned := 0
	for _, s := range c.Map().Segments {
		if *s.Owner == 1 {
			owned++
		}
	}
	require.Positive(t, owned, "node 1 owns nothing after failback")
	w.finish(t)
	ep.finish(t)
}

func TestJoin_NewNodeTakesSegmentsUnderWrites(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	ep := watchEpochs(c)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)

	id, err := c.Join(ctx)
	require.NoError(t, err)
	w.waitAcked(t, 50)
	require.NoError(t, c.WaitSettled(ctx))
	owned := 0
	for _, s := range c.Map().Segments {
		if *s.Owner == id {
			owned++
		}
	}
	require.Equal(t, 16/4, owned)
	w.finish(t)
	ep.finish(t)
}

func TestLeave_DrainedNodeLosesNoAckedWrite(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	ep := watchEpochs(c)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)

	require.NoError(t, c.Leave(ctx, 3))
	w.waitAcked(t, 50)
	require.NoError(t, c.WaitSettled(ctx))
	m := c.Map()
	for _, n := range m.Nodes {
		require.NotEqual(t, int32(3), n.ID)
	}
	for _, s := range m.Segments {
		require.NotEqual(t, int32(3), *s.Owner)
		require.NotContains(t, s.Replicas, int32(3))
		require.Len(t, s.Replicas, 1, "segment %d lost a copy", s.ID)
	}
	w.finish(t)
	ep.finish(t)
}

func TestMigrateSegment_MovesOwnershipUnderWrites(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	ep := watchEpochs(c)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)

	seg := c.Map().Segments[0]
	require.Equal(t, int32(1), *seg.Owner)
	require.NoError(t, c.MigrateSegment(ctx, 0, 3))
	w.waitAcked(t, 50)
	require.NoError(t, c.WaitSettled(ctx))
	seg = c.Map().Segments[0]
	require.Equal(t, int32(3), *seg.Owner)
	require.NotContains(t, seg.Replicas, int32(1), "the source keeps a copy it should have dropped")
	w.finish(t)
	ep.finish(t)
}

func TestSpuriousFailover_LiveNodeRejoinsAndLosesNoAckedWrite(t *testing.T) {
	cfg := fastCluster()
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	ep := watchEpochs(c)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 50)

	// The coordinator gives up on node 2 although it runs (as after a long stall): it ends
	// its etcd lease, waits the TTL out and fails it over. Node 2 learns of the loss at its
	// next renewal and registers again.
	co := c.Coordinator()
	giveUp(t, co, 2)
	w.waitAcked(t, 50)

	require.NoError(t, co.WaitNode(ctx, 2, true), "node 2 never registered again")
	require.NoError(t, c.WaitSettled(ctx))
	require.NoError(t, c.Failback(ctx, 2))
	w.waitAcked(t, 50)
	w.finish(t)
	ep.finish(t)
}

func TestSpuriousFailover_SoleCopyComesBackIntact(t *testing.T) {
	cfg := ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1, FailureTimeout: time.Second}
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	r := newRouter(c.Seeds())
	defer r.close()
	acked := r.putKeys(t, 50)

	// The coordinator gives up on node 1, the only copy of its segments, while it runs: the
	// segments have no owner until the same process registers again, data intact.
	co := c.Coordinator()
	giveUp(t, co, 1)
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil {
				return false
			}
		}
		return true
	}))
	for k, v := range acked {
		st, got, err := r.get1(k)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st, k)
		require.Equal(t, v, got)
	}
}

func TestRestart_SoleCopyLostStartsAfresh(t *testing.T) {
	c := StartCluster(t, ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1, FailureTimeout: time.Second})
	ctx := testCtx(t)
	owner, _, _ := roles(c, 0)
	require.NoError(t, c.Kill(owner))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[0].Owner == nil }))

	// The killed process took the only copy with it; the segment stays without owner until the
	// node is back, then starts empty.
	require.NoError(t, c.Restart(ctx, owner))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[0].Owner != nil }))
	require.NoError(t, c.WaitSettled(ctx))
	r := newRouter(c.Seeds())
	defer r.close()
	st, err := r.put1(string(keyIn(0, 16, "fresh")), "v", nil)
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
}

func TestFailover_RefusedProbeFailsOverWithoutWaitingForTheTimeout(t *testing.T) {
	// A failure timeout far longer than the test may run: only the refused probe after the
	// dropped connection can fail the killed node over in time.
	cfg := fastCluster()
	cfg.FailureTimeout = time.Hour
	c := StartCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Kill(3))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 3, false))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil || *s.Owner == 3 {
				return false
			}
		}
		return true
	}))
}

func TestLeave_LeftNodeDoesNotRejoin(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	co := c.Coordinator()
	n := c.Node(3)
	require.NoError(t, co.Leave(ctx, 3)) // the coordinator's Leave: the process keeps running

	// The running process hears nothing more from the coordinator; if it registers again
	// (its etcd lease lost, say), the coordinator refuses a process that left.
	req := &zarispeer.RegisterRequest{NodeId: 3, Incarnation: n.incarnation, Host: "127.0.0.1", Port: 1, PeerAddr: n.PeerAddr()}
	_, err := co.register(req)
	var left *zarispeer.LeftCluster
	require.ErrorAs(t, err, &left)
	for _, node := range c.Map().Nodes {
		require.NotEqual(t, int32(3), node.ID)
	}
}
