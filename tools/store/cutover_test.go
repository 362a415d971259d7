package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// cutoverNode starts a lone node, puts segment 0 of the node's map in cut-over by hand (as the first step of a fenced handoff
// does), and returns the node and a key of segment 0.
func cutoverNode(t *testing.T, wait time.Duration) (*Node, []byte) {
	t.Helper()
	n := loneNode(t, NodeConfig{CutoverWait: wait})
	pm := cloneMap(n.current.Load().pm)
	pm.Epoch++
	pm.Segments[0].Cutover = true
	require.True(t, n.install(pm))
	return n, keyIn(0, pm.SegmentCount, "cutover")
}

// endCutover installs the map that ends segment 0's cut-over, as the handoff's last step.
func endCutover(t *testing.T, n *Node) {
	t.Helper()
	pm := cloneMap(n.current.Load().pm)
	pm.Epoch++
	pm.Segments[0].Cutover = false
	require.True(t, n.install(pm))
}

// waitForCutoverWaiters waits until k requests wait for the cut-over to end, or fails if one
// answered first.
func waitForCutoverWaiters(t *testing.T, n *Node, k int32, answered ...<-chan zaris.KvStatus) {
	t.Helper()
	for n.cutoverWaiters.Load() < k {
		for _, a := range answered {
			select {
			case st := <-a:
				t.Fatalf("a request answered %v at once instead of waiting for the cut-over to end", st)
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// putAsync runs a Put at n and returns its status once it answers.
func putAsync(n *Node, key []byte) <-chan zaris.KvStatus {
	out := make(chan zaris.KvStatus, 1)
	go func() {
		resp, err := (&kvHandler{n: n}).Put(context.Background(), &zaris.PutRequest{Key: key, Value: []byte("v")})
		if err != nil {
			out <- zaris.KvStatus(-1)
			return
		}
		out <- resp.Status
	}()
	return out
}

// A read and a write that meet a handoff's cut-over wait for the map that ends it and are
// answered from that map, rather than answering Unavailable and Migrating at once and
// costing the client a backoff (100 ms, and 800 ms after Migrating). Before the wait, both
// answered at once.
func TestCutover_RequestsWaitForTheMapThatEndsIt(t *testing.T) {
	n, key := cutoverNode(t, time.Hour)
	other := keyIn(0, n.current.Load().segCount, "cutover-put") // a Put served first must not answer the Get
	get, put := getAsync(n, key), putAsync(n, other)
	waitForCutoverWaiters(t, n, 2, get, put)
	endCutover(t, n)
	assert.Equal(t, zaris.KvStatus_NotFound, <-get)
	assert.Equal(t, zaris.KvStatus_Ok, <-put)
}

// A cut-over that outlasts CutoverWait (an old owner that does not confirm the revoke)
// still answers a read at the owner Unavailable and a write Migrating: the fence holds.
func TestCutover_OutlastingTheWaitStillFences(t *testing.T) {
	n, key := cutoverNode(t, time.Millisecond)
	assert.Equal(t, zaris.KvStatus_Unavailable, <-getAsync(n, key))
	assert.Equal(t, zaris.KvStatus_Migrating, <-putAsync(n, key))
}
