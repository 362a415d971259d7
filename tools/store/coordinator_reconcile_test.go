package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// A handoff whose old owner cannot confirm its cut-over holds back no segment another node
// owns. Here the owner of segment replicatedSeg is seeing a write through to its paused
// replica, so a migration of the segment waits in its cut-over; a migration of a segment the
// third node owns, to its replica on that same owner, completes meanwhile. Once the replica
// resumes, the first one completes too.
func TestHandoff_AHeldHandoffHoldsBackNoOtherSegment(t *testing.T) {
	c, owner, replica, key := replicatedKey(t)
	ctx := testCtx(t)
	// Owned by the node that holds no copy of replicatedSeg, with its replica on
	// replicatedSeg's owner, so neither end waits for the paused replica.
	_, _, other := roles(c, replicatedSeg)
	seg2 := segmentWhere(t, c, func(s *zaris.SegmentInfo) bool { return *s.Owner == other && slices.Contains(s.Replicas, owner) })
	resume, held := holdHandoff(t, c, owner, replica, key)

	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.MigrateSegment(within, seg2, owner), "the migration of segment %d waited for segment %d's", seg2, replicatedSeg)
	require.True(t, inCutover(c, replicatedSeg) && *c.Map().Segments[replicatedSeg].Owner == owner,
		"segment %d's handoff was not held: %v", replicatedSeg, c.Map().Segments[replicatedSeg])

	resume()
	require.NoError(t, <-held)
	require.Equal(t, replica, *c.Map().Segments[replicatedSeg].Owner)
}

// An owner confirms a map as a whole, so while one of its handoffs is held, another
// migration away from the same owner waits unrevoked: its segment is not put in a cut-over
// (writes Migrating, reads Unavailable) that its owner cannot confirm. It runs once the
// first is done.
func TestHandoff_AHeldHandoffKeepsItsOwnersOtherSegmentsOutOfCutover(t *testing.T) {
	c, owner, replica, key := replicatedKey(t)
	ctx := testCtx(t)
	_, _, other := roles(c, replicatedSeg)
	seg2 := segmentWhere(t, c, func(s *zaris.SegmentInfo) bool { return s.ID != replicatedSeg && *s.Owner == owner })
	resume, held := holdHandoff(t, c, owner, replica, key)

	waiting := make(chan error, 1)
	go func() { waiting <- c.MigrateSegment(ctx, seg2, other) }()
	require.Never(t, func() bool { return inCutover(c, seg2) }, time.Second, 10*time.Millisecond,
		"segment %d went into cut-over behind segment %d's held handoff", seg2, replicatedSeg)

	resume()
	require.NoError(t, <-held)
	require.NoError(t, <-waiting, "the second migration never ran once the first was done")
	require.Equal(t, other, *c.Map().Segments[seg2].Owner)
}

// holdHandoff pauses replica's copy of segment replicatedSeg, has owner see a write of key
// through to it, and migrates the segment to replica: the migration waits in its cut-over
// until resume, and then ends on held. The replica resumes when the test ends at the latest.
func holdHandoff(t *testing.T, c *Cluster, owner, replica int32, key []byte) (resume func(), held <-chan error) {
	ctx := testCtx(t)
	rseg := c.Node(replica).segments()[replicatedSeg]
	rseg.mu.Lock()
	var once sync.Once
	resume = func() { once.Do(rseg.mu.Unlock) }
	t.Cleanup(resume)
	_, err := mustDial(t, c.Addr(owner)).Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	require.Error(t, err, "a write its paused replica may hold was answered")
	done := make(chan error, 1)
	go func() { done <- c.MigrateSegment(ctx, replicatedSeg, replica) }()
	require.Eventually(t, func() bool { return inCutover(c, replicatedSeg) }, 10*time.Second, time.Millisecond,
		"the migration of segment %d never started its cut-over", replicatedSeg)
	return resume, done
}

// segmentWhere returns the first segment of the map with an owner that match accepts.
func segmentWhere(t *testing.T, c *Cluster, match func(*zaris.SegmentInfo) bool) int32 {
	for _, s := range c.Map().Segments {
		if s.Owner != nil && match(s) {
			return s.ID
		}
	}
	t.Fatalf("no segment of the map fits the test: %v", c.Map().Segments)
	return -1
}

// inCutover reports whether the coordinator's map puts segment s in cut-over.
func inCutover(c *Cluster, s int32) bool {
	co := c.Coordinator()
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.m.Segments[s].Cutover
}
