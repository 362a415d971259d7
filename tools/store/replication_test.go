package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// replicatedSeg is the segment the tests of this file write to.
const replicatedSeg = 0

// replicatedKey starts a cluster whose owners wait 300 ms for their replicas, and writes
// "v1" to a key of segment replicatedSeg. It returns the segment's owner and replica, and
// the key.
func replicatedKey(t *testing.T) (c *Cluster, owner, replica int32, key []byte) {
	cfg := fastCluster()
	cfg.Node.ReplicationTimeout = 300 * time.Millisecond
	c = StartCluster(t, cfg)
	owner, replica, _ = roles(c, replicatedSeg)
	key = keyIn(replicatedSeg, 16, "replicated")
	putUntilOk(t, c.Addr(owner), key, "v1", "owner")
	return c, owner, replica, key
}

// A write in flight when its segment migrates: the owner sends it to the replica, the
// replica takes longer than the peer timeout to apply it (it is paused), and the cut-over
// arrives meanwhile. Whatever the client is told, the copies must agree afterwards: once
// the new owner (the replica) answered a read with the write, the old owner, kept as replica,
// must answer the same when the new owner dies and it takes the segment back.
func TestHandoff_WriteInFlightAtCutoverLeavesTheCopiesAlike(t *testing.T) {
	c, owner, replica, key := replicatedKey(t)
	ctx := testCtx(t)

	// The replica pauses: it installs no map and applies no write to the segment.
	rn := c.Node(replica)
	rseg := rn.segments()[replicatedSeg]
	rn.installMu.Lock()
	rseg.mu.Lock()
	installing, applying := true, true
	defer func() {
		if applying {
			rseg.mu.Unlock()
		}
		if installing {
			rn.installMu.Unlock()
		}
	}()

	cl := mustDial(t, c.Addr(owner))
	defer cl.trans.Close()
	put := make(chan error, 1)
	go func() {
		resp, err := cl.Put(context.Background(), &zaris.PutRequest{Key: key, Value: []byte("v2")})
		if err == nil && resp.Status != zaris.KvStatus_Ok {
			err = fmt.Errorf("status %v", resp.Status)
		}
		put <- err
	}()
	// The write is in flight at the owner once it holds the segment's write lock.
	oseg := c.Node(owner).segments()[replicatedSeg]
	require.Eventually(t, func() bool {
		if oseg.writeMu.TryLock() {
			oseg.writeMu.Unlock()
			return false
		}
		return true
	}, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // its Replicate reaches the paused replica

	migrated := make(chan error, 1)
	go func() { migrated <- c.MigrateSegment(ctx, replicatedSeg, replica) }()
	t.Logf("the write ended with %v", <-put)

	// The replica resumes: the Replicate it held lands, then the maps.
	rseg.mu.Unlock()
	applying = false
	require.Eventually(t, func() bool {
		rseg.mu.Lock()
		defer rseg.mu.Unlock()
		return string(rseg.data[string(key)].value) == "v2"
	}, 10*time.Second, time.Millisecond, "the replica never applied the write")
	rn.installMu.Unlock()
	installing = false
	require.NoError(t, <-migrated)

	read := func(addr string) string {
		deadline := time.Now().Add(10 * time.Second)
		for ; ; time.Sleep(5 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "no read at %s answered", addr)
			r, err := dialRaw(addr)
			if err != nil {
				continue
			}
			g, err := r.Get(ctx, &zaris.GetRequest{Key: key})
			r.trans.Close()
			if err == nil && g.Status == zaris.KvStatus_Ok {
				return string(g.Value)
			}
		}
	}
	seen := read(c.Addr(replica))
	require.NoError(t, c.Kill(replica))
	require.Equal(t, seen, read(c.Addr(owner)),
		"the new owner answered %q; once it died the old owner answered otherwise", seen)
}

// A write whose replica does not answer within ReplicationTimeout: while the replica is
// paused, the write may have reached it, so the caller gets no answer (in doubt) and the owner
// sees the write through once the replica answers; when the replica's port refuses (it was
// killed, and no coordinator drops it from the map), nothing can hold the write and the
// caller is answered Unavailable, the key unchanged.
func TestReplicationTimeout_AnswersUnavailableOnlyWhenNoCopyCanHoldTheWrite(t *testing.T) {
	c, owner, replica, key := replicatedKey(t)
	ctx := testCtx(t)
	cl := mustDial(t, c.Addr(owner))
	defer cl.trans.Close()

	rseg := c.Node(replica).segments()[replicatedSeg]
	rseg.mu.Lock()
	_, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	rseg.mu.Unlock()
	require.Error(t, err, "a write its replica may hold was answered")
	require.Eventually(t, func() bool {
		r := mustDial(t, c.Addr(owner))
		defer r.trans.Close()
		g, err := r.Get(ctx, &zaris.GetRequest{Key: key})
		return err == nil && g.Status == zaris.KvStatus_Ok && string(g.Value) == "v2"
	}, 10*time.Second, time.Millisecond, "the owner never saw the write through")

	// The replica is killed, and no coordinator drops it from the map. A first write may
	// go out on a pooled connection the replica had accepted (so in doubt, and seen through
	// once the replica is back or dropped); the next is never sent.
	require.NoError(t, c.StopCoordinator())
	require.NoError(t, c.Kill(replica))
	for i, v := range []string{"v3", "v4"} {
		cl := mustDial(t, c.Addr(owner))
		defer cl.trans.Close()
		put, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte(v)})
		if i == 0 && err != nil {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Unavailable, put.Status)
	}
	cl = mustDial(t, c.Addr(owner))
	defer cl.trans.Close()
	g, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, "v2", string(g.Value))
}

// A cut-over map installed while a write is between its route and its replication (here,
// while it decides on the current value): the node confirms the cut-over at once (no write
// holds confirmedEpoch back yet), so the write must then reach no copy, else a new owner
// could be named while the old owner still sends it (the copies would disagree, as in
// TestHandoff_WriteInFlightAtCutoverLeavesTheCopiesAlike). The coordinator is stopped so the
// maps are the test's alone.
func TestHandoff_CutoverConfirmedDuringAWriteKeepsItFromAnyCopy(t *testing.T) {
	c := StartCluster(t, fastCluster())
	const seg = 0
	owner, replica, _ := roles(c, seg)
	key := keyIn(seg, 16, "confirm")
	putUntilOk(t, c.Addr(owner), key, "v1", "owner")
	require.NoError(t, c.StopCoordinator())

	n := c.Node(owner)
	var cutEpoch, confirmed int64
	r := n.write(testCtx(t), key, nil, func(cur entry, exists bool) change {
		pm := cloneMap(n.current.Load().pm)
		pm.Epoch++
		pm.Segments[seg].Cutover = true
		require.True(t, n.install(pm))
		cutEpoch, confirmed = pm.Epoch, n.confirmedEpoch()
		return change{value: []byte("v2")}
	})
	require.Equal(t, cutEpoch, confirmed, "the node did not confirm the cut-over")
	require.Equal(t, zaris.KvStatus_Migrating, r.status, "a write went on after its node confirmed the cut-over")
	rseg := c.Node(replica).segments()[seg]
	rseg.mu.Lock()
	defer rseg.mu.Unlock()
	require.Equal(t, "v1", string(rseg.data[string(key)].value), "the replica applied a write sent after the cut-over was confirmed")
}

// A write still being seen through (its replica paused, no coordinator to drop it) does not
// keep its node from closing: Close ends the resending and returns.
func TestClose_EndsAWriteBeingSeenThrough(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.ReplicationTimeout = 300 * time.Millisecond
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	const seg = 0
	owner, replica, _ := roles(c, seg)
	key := keyIn(seg, 16, "close")
	putUntilOk(t, c.Addr(owner), key, "v1", "owner")
	require.NoError(t, c.StopCoordinator())

	rseg := c.Node(replica).segments()[seg]
	rseg.mu.Lock()
	defer rseg.mu.Unlock()
	cl := mustDial(t, c.Addr(owner))
	defer cl.trans.Close()
	_, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	require.Error(t, err, "a write its replica may hold was answered")
	n := c.Node(owner)
	require.NotZero(t, n.segments()[seg].writing.Load(), "the write is no longer being seen through")

	closed := make(chan struct{})
	go func() {
		n.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close waited for a write that cannot complete")
	}
}

// A learner's Fetch that meets a write still being seen through (here the test holds the
// segment's write lock, as such a write does) is answered once ReplicationTimeout passed,
// rather than waiting as long as the write: else each fetch the learner retries after its
// own timeout stays behind, blocked, for as long as the write lasts.
func TestFetch_WaitsForAWriteBeingSeenThroughAtMostReplicationTimeout(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.ReplicationTimeout = 100 * time.Millisecond
	c := StartCluster(t, cfg)
	const seg = 0
	owner, replica, _ := roles(c, seg)
	putUntilOk(t, c.Addr(owner), keyIn(seg, 16, "fetch"), "v1", "owner")
	n := c.Node(owner)
	oseg := n.segments()[seg]
	require.True(t, oseg.writeMu.TryLock())
	defer oseg.writeMu.Unlock()

	v := n.current.Load()
	fetched := make(chan error, 1)
	go func() {
		resp, err := (&peerHandler{n: n}).Fetch(context.Background(), &zarispeer.FetchRequest{
			Learner: replica, Epoch: v.epoch, Segment: seg, ClusterId: v.pm.ClusterId,
		})
		if err == nil {
			err = fmt.Errorf("answered %v while a write held the segment", resp.Status)
		}
		fetched <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-fetched:
		require.ErrorContains(t, err, "still being replicated")
	case <-ctx.Done():
		t.Fatal("the fetch waited as long as the write")
	}
}
