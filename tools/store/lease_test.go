package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// leaseCluster starts a one-node cluster whose coordinator never suspects the node, and
// returns the node with its right to serve run out as after a stall its clock saw and its
// lease renewals did not (the clock jumped an hour), and a key it owns. The test renews the
// right by hand; the node's own next renewal would do the same.
func leaseCluster(t *testing.T, leaseWait time.Duration) (*Node, []byte) {
	t.Helper()
	clock := newTestClock(0)
	n := loneNode(t, NodeConfig{LeaseWait: leaseWait, Clock: clock, LeaseTTL: time.Hour})
	require.True(t, n.leased())
	clock.Jump(2 * time.Hour) // the right ran out during a stall
	require.False(t, n.leased())
	v := n.current.Load()
	require.Equal(t, int32(1), v.segs[0].owner)
	return n, keyIn(0, v.segCount, "lease")
}

// renew records a renewal of n's etcd lease sent now, as the node's renewal after a stall.
func renew(n *Node) { n.live.Renewed(n.cfg.Clock.Mono(), n.cfg.LeaseTTL) }

// loneNode starts a one-node cluster of four segments whose coordinator never suspects the
// node, and returns the node.
func loneNode(t *testing.T, nc NodeConfig) *Node {
	t.Helper()
	cfg := ClusterConfig{Nodes: 1, Segments: 4, ReplicationFactor: 1, FailureTimeout: time.Hour, ProbeTimeout: time.Hour,
		Logger: testLogger(), Node: nc}
	return StartCluster(t, cfg).Node(1)
}

// getAsync runs a Get at n and returns its status once it answers.
func getAsync(n *Node, key []byte) <-chan zaris.KvStatus {
	out := make(chan zaris.KvStatus, 1)
	go func() {
		resp, err := (&kvHandler{n: n}).Get(context.Background(), &zaris.GetRequest{Key: key})
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

// A request that finds the right to serve run out (a stall of the whole process) waits for
// the next renewal of the node's etcd lease and is served, instead of answering Unavailable
// and costing the application a retry.
func TestLease_RunOutDuringAStallWaitsForTheRenewal(t *testing.T) {
	n, key := leaseCluster(t, time.Hour)
	answered := getAsync(n, key)
	waitForWaiter(t, n, answered)
	renew(n) // the renewal after the stall
	assert.Equal(t, zaris.KvStatus_NotFound, <-answered)
}

// A node whose lease is not renewed within LeaseWait still answers Unavailable; so does one
// whose map changed while it waited.
func TestLease_RunOutWithoutARenewalIsUnavailable(t *testing.T) {
	n, key := leaseCluster(t, time.Millisecond)
	assert.Equal(t, zaris.KvStatus_Unavailable, <-getAsync(n, key))

	n.cfg.LeaseWait = time.Hour
	answered := getAsync(n, key)
	waitForWaiter(t, n, answered)
	pm := cloneMap(n.current.Load().pm)
	pm.Epoch++
	require.True(t, n.install(pm))
	renew(n)
	assert.Equal(t, zaris.KvStatus_Unavailable, <-answered)
}
