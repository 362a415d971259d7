package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// leaseCluster starts a one-node cluster whose coordinator never suspects the node and whose
// node never registers again by itself, and returns the node with its heartbeats held back
// (as a stalled process holds them) and a key it owns. The test drives the lease by hand.
func leaseCluster(t *testing.T, leaseWait time.Duration) (*Node, []byte) {
	t.Helper()
	n := loneNode(t, NodeConfig{LeaseWait: leaseWait})
	n.slowness.Store(int64(time.Hour)) // heartbeats wait in the node: no lease extension comes
	n.leaseMu.Lock()
	n.leaseUntil.Store(time.Now().Add(-time.Second).UnixNano()) // the lease ran out during a stall
	n.leaseMu.Unlock()
	v := n.current.Load()
	require.Equal(t, int32(1), v.segs[0].owner)
	return n, keyIn(0, v.segCount, "lease")
}

// loneNode starts a one-node cluster of four segments whose coordinator never suspects the
// node and whose node never registers again by itself, and returns the node.
func loneNode(t *testing.T, nc NodeConfig) *Node {
	t.Helper()
	nc.RejoinAfter = time.Hour
	cfg := ClusterConfig{Nodes: 1, Segments: 4, ReplicationFactor: 1, FailureTimeout: time.Hour, ProbeTimeout: time.Hour,
		Logger: testLogger(), Node: nc}
	return StartCluster(t, cfg).Node(1)
}

// getAsync runs a Get at n and returns its status once it answers.
func getAsync(n *Node, key []byte) <-chan zaris.KvStatus {
	out := make(chan zaris.KvStatus, 1)
	go func() {
		resp, err := (&kvHandler{n}).Get(context.Background(), &zaris.GetRequest{Key: key})
		if err != nil {
			out <- zaris.KvStatus(-1)
			return
		}
		out <- resp.Status
	}()
	return out
}

// waitForWaiter waits until a request is waiting for the lease, or the request answered.
func waitForWaiter(t *testing.T, n *Node, answered <-chan zaris.KvStatus) {
	t.Helper()
	for n.leaseWaiters.Load() == 0 {
		select {
		case st := <-answered:
			t.Fatalf("the request answered %v at once instead of waiting for the lease", st)
		case <-time.After(time.Millisecond):
		}
	}
}

// A request that finds the lease run out (a stall of the whole process) waits for the
// coordinator's next heartbeat and is served, instead of answering Unavailable and costing
// the application a retry. Before the lease wait it answered Unavailable.
func TestLease_RunOutDuringAStallWaitsForTheHeartbeat(t *testing.T) {
	n, key := leaseCluster(t, time.Hour)
	answered := getAsync(n, key)
	waitForWaiter(t, n, answered)
	n.extendLease(time.Now().Add(time.Minute).UnixNano()) // the heartbeat after the stall
	assert.Equal(t, zaris.KvStatus_NotFound, <-answered)
}

// A node that gets no heartbeat within LeaseWait (the coordinator gave up on it) still
// answers Unavailable; so does one whose map changed while it waited.
func TestLease_RunOutWithoutAHeartbeatIsUnavailable(t *testing.T) {
	n, key := leaseCluster(t, time.Millisecond)
	assert.Equal(t, zaris.KvStatus_Unavailable, <-getAsync(n, key))

	n.cfg.LeaseWait = time.Hour
	answered := getAsync(n, key)
	waitForWaiter(t, n, answered)
	pm := cloneMap(n.current.Load().pm)
	pm.Epoch++
	require.True(t, n.install(pm))
	n.extendLease(time.Now().Add(time.Minute).UnixNano())
	assert.Equal(t, zaris.KvStatus_Unavailable, <-answered)
}
