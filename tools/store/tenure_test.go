package store

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// A learner fetches its copy of a segment from the owner, then pauses before it reports the
// copy. Meanwhile the owner is failed over while alive, registers again as the same process
// and owns the segment again: it forwards its writes only to learners that fetched from it
// since, so it acknowledges a write the paused learner's copy lacks. When the learner resumes
// and reports the copy, the coordinator must have it fetched again: taken as in sync, the
// copy would make the learner a replica that misses an acknowledged write, and the next
// owner if the owner then dies.
func TestSynced_CopyFromTheOwnersPreviousTenureIsFetchedAgain(t *testing.T) {
	cfg := ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1, FailureTimeout: time.Second, Logger: testLogger()}
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	co := c.Coordinator()
	const owner, learner = 1, 2
	seg := int32(slices.IndexFunc(c.Map().Segments, func(s *zaris.SegmentInfo) bool { return *s.Owner == owner }))
	require.GreaterOrEqual(t, seg, int32(0))
	key := keyIn(seg, 16, "tenure")
	putUntilOk(t, c.Addr(owner), key, "v1", "owner")

	// The learner is paused: it installs no map, so it never fetches or reports on its own,
	// but it answers the coordinator's pings and stays a member.
	ln := c.Node(learner)
	ln.installMu.Lock()
	paused := true
	defer func() {
		if paused {
			ln.installMu.Unlock()
		}
	}()

	// The coordinator wants a second copy of the segment on the learner.
	co.mu.Lock()
	co.want[seg].members = []int32{owner, learner}
	require.NoError(t, co.persistLocked())
	co.mu.Unlock()
	co.kickReconcile()
	on := c.Node(owner)
	require.Eventually(t, func() bool { return on.current.Load().segs[seg].isLearner(learner) }, 10*time.Second,
		time.Millisecond, "the owner never had the learner in its map")

	// What the learner did before it paused: fetch a copy from the owner.
	pm := on.current.Load().pm
	pool := newConnPool(time.Second, c.Credentials().ClientTLS())
	defer pool.close()
	var fetched *zarispeer.FetchResponse
	require.NoError(t, pool.call(on.PeerAddr(), time.Second, func(tc thrift.TClient) error {
		var err error
		fetched, err = zarispeer.NewZarisPeerClient(tc).Fetch(ctx, &zarispeer.FetchRequest{
			Learner: learner, Epoch: pm.Epoch, Segment: seg, ClusterId: pm.ClusterId,
		})
		return err
	}))
	require.Equal(t, zarispeer.PeerStatus_Ok, fetched.Status)

	// The owner is failed over while alive, registers again and gets the segment back with
	// its data; then it acknowledges a write.
	giveUp(t, co, owner)
	require.Eventually(t, func() bool {
		s := c.Map().Segments[seg]
		return s.Owner != nil && *s.Owner == owner
	}, 10*time.Second, time.Millisecond, "the owner never got its segment back")
	putUntilOk(t, c.Addr(owner), key, "v2", "owner again")

	// The learner resumes and reports the copy it fetched before.
	resp, err := (&coordHandler{c: co}).Synced(ctx, &zarispeer.SyncedRequest{
		NodeId: learner, Incarnation: ln.incarnation, Segment: seg, Owner: owner, FetchEpoch: fetched.Epoch,
	})
	require.NoError(t, err)
	require.True(t, resp.Refetch, "a copy fetched before the owner lost the segment was taken as in sync")
	co.mu.Lock()
	_, synced := co.synced[syncKey{seg, learner}]
	co.mu.Unlock()
	require.False(t, synced, "a copy fetched before the owner lost the segment counts as in sync")

	// Resumed for real, the learner fetches anew and becomes a replica holding the write.
	ln.installMu.Unlock()
	paused = false
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		return slices.Contains(m.Segments[seg].Replicas, learner)
	}))
	ls := ln.segments()[seg]
	ls.mu.Lock()
	e := ls.data[string(key)]
	ls.mu.Unlock()
	require.Equal(t, "v2", string(e.value), "the new replica lacks an acknowledged write")
}
