package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

func clusterID(c *Cluster) string {
	co := c.Coordinator()
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.m.ClusterId
}

// A coordinator restarted with the same etcd continues the same cluster: same cluster id,
// the epoch goes up, the nodes take its maps, and writes acknowledged before, during and
// after the restart all read back.
func TestCoordinator_RestartContinuesTheCluster(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 100)
	id, epoch := clusterID(c), c.Map().Epoch

	require.NoError(t, c.StopCoordinator())
	require.NoError(t, c.RestartCoordinator())
	require.Equal(t, id, clusterID(c), "the restarted coordinator started another cluster")
	require.Greater(t, c.Map().Epoch, epoch)
	require.NoError(t, c.WaitSettled(ctx))
	w.waitAcked(t, 100)

	// It still drives churn: a killed node is failed over.
	require.NoError(t, c.Kill(2))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 2, false))
	w.waitAcked(t, 100)
	w.finish(t)
}

// A migration stopped at its midpoint (the old owner revoked, the new one not yet named)
// by the coordinator's death is resumed by the next coordinator from the state in etcd.
func TestCoordinator_RestartResumesAHalfDoneMigration(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	w := startWorkload(t, c.Seeds(), 4)
	w.cluster = c
	w.waitAcked(t, 100)

	const seg = 3
	m := c.Map()
	from := *m.Segments[seg].Owner
	to := m.Segments[seg].Replicas[0]
	release := c.HoldChurn()
	done := make(chan error, 1)
	go func() { done <- c.MigrateSegment(ctx, seg, to) }()
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[seg].Migrating }))
	co := c.Coordinator()
	require.NoError(t, co.waitUntil(ctx, func() (bool, error) { return co.m.Segments[seg].Cutover, nil }))

	require.NoError(t, c.StopCoordinator())
	release()
	require.ErrorIs(t, <-done, ErrClosed)
	require.NoError(t, c.RestartCoordinator())
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		sg := m.Segments[seg]
		return sg.Owner != nil && *sg.Owner == to && !sg.Migrating
	}), "the migration of segment %d from %d to %d was not resumed", seg, from, to)
	require.NoError(t, c.WaitSettled(ctx))
	w.waitAcked(t, 100)
	w.finish(t)
}

// A coordinator whose leadership ended commits nothing more: its commit fails with
// ErrNotLeader, it tells no node, and it stops acting.
func TestCoordinator_DeposedLeaderStopsActing(t *testing.T) {
	cli, prefix := control.ForTest(t)
	el, err := control.NewElector(cli, prefix, "a", 1)
	require.NoError(t, err)
	defer el.Close()
	fence, err := el.Campaign(testCtx(t))
	require.NoError(t, err)
	co, err := StartCoordinator(CoordinatorConfig{Etcd: cli, EtcdPrefix: prefix, Fence: fence, Segments: 4})
	require.NoError(t, err)
	defer co.Close()
	for id := int32(1); id <= 2; id++ { // the nodes' registrations in etcd
		value, err := json.Marshal(nodeValue{Incarnation: 1, TTL: time.Second})
		require.NoError(t, err)
		reg, err := control.Register(testCtx(t), cli, prefix, id, string(value), time.Second, control.NewLiveness(control.SystemClock(), 0))
		require.NoError(t, err)
		defer reg.Close(context.Background())
	}
	_, err = co.register(&zarispeer.RegisterRequest{NodeId: 1, Incarnation: 1, Host: "127.0.0.1", Port: 1, PeerAddr: "127.0.0.1:1"})
	require.NoError(t, err)
	stored := func() int64 {
		st, err := control.NewStateStore(cli, prefix).Load(context.Background())
		require.NoError(t, err)
		return int64(st.Epoch)
	}

	require.NoError(t, el.Resign(testCtx(t)))
	// The last map it committed while it led (its failover of node 1 may have come first).
	epoch := stored()
	// Either this registration's commit fails, or the failover of node 1 (nothing listens at
	// its address) failed first and stopped the coordinator.
	_, err = co.register(&zarispeer.RegisterRequest{NodeId: 2, Incarnation: 1, Host: "127.0.0.1", Port: 2, PeerAddr: "127.0.0.1:2"})
	require.Error(t, err)
	select {
	case <-co.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deposed coordinator still acts")
	}
	require.True(t, errors.Is(co.Err(), control.ErrNotLeader), "Err: %v", co.Err())
	require.Equal(t, epoch, stored(), "the deposed coordinator committed a map")
	require.Equal(t, epoch, co.Map().Epoch, "the deposed coordinator published a map it did not commit while it led")
}
