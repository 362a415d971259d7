package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// TestStall_StalledOwnerIsFailedOverAndServesNothingStale: a node stalled past its lease
// (Cluster.Stall, as SIGSTOP would) answers nothing meanwhile, is failed over to its
// replica, which takes new writes; the read that waited in its connection is answered, once
// the stall ends, with churn, never with the value it held.
func TestStall_StalledOwnerIsFailedOverAndServesNothingStale(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	const seg = 0
	key := keyIn(seg, 16, "k")
	owner, replica, _ := roles(c, seg)
	putUntilOk(t, c.Addr(owner), key, "old", "owner")
	before := failovers(c.Coordinator(), owner)
	cl := mustDial(t, c.Addr(owner)) // connected before the stall

	require.NoError(t, c.Stall(owner, 4*time.Second))
	got := make(chan *zaris.GetResponse, 1)
	go func() {
		resp, err := cl.Get(context.Background(), &zaris.GetRequest{Key: key})
		if err != nil {
			resp = nil
		}
		got <- resp
	}()
	waitFailedOver(t, c.Coordinator(), owner, before)
	putUntilOk(t, c.Addr(replica), key, "new", "replica")
	select {
	case resp := <-got:
		require.NotNil(t, resp, "the read failed")
		require.NotEqual(t, zaris.KvStatus_Ok, resp.Status, "the stalled owner served a read: %q", resp.Value)
		require.True(t, retryable(resp.Status), "the stalled owner answered %v", resp.Status)
	case <-ctx.Done():
		t.Fatal("the stalled owner never answered the read that waited")
	}
	require.Error(t, c.Stall(99, time.Second), "no such node")
}
