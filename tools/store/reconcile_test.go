package store

import (
	"context"
	"slices"
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

	// The other segment: owned by the node that holds no copy of replicatedSeg, with its
	// replica on replicatedSeg's owner, so neither end waits for the paused replica.
	_, _, other := roles(c, replicatedSeg)
	seg2 := int32(-1)
	for _, s := range c.Map().Segments {
		if s.Owner != nil && *s.Owner == other && slices.Contains(s.Replicas, owner) {
			seg2 = s.ID
			break
		}
	}
	require.NotEqual(t, int32(-1), seg2, "no segment owned by %d with a replica on %d", other, owner)

	rseg := c.Node(replica).segments()[replicatedSeg]
	rseg.mu.Lock()
	paused := true
	defer func() {
		if paused {
			rseg.mu.Unlock()
		}
	}()
	cl := mustDial(t, c.Addr(owner))
	_, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	require.Error(t, err, "a write its paused replica may hold was answered")

	held := make(chan error, 1)
	go func() { held <- c.MigrateSegment(ctx, replicatedSeg, replica) }()
	require.Eventually(t, func() bool { return inCutover(c, replicatedSeg) }, 10*time.Second, time.Millisecond,
		"the migration of segment %d never started its cut-over", replicatedSeg)

	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.MigrateSegment(within, seg2, owner), "the migration of segment %d waited for segment %d's", seg2, replicatedSeg)
	require.True(t, inCutover(c, replicatedSeg) && *c.Map().Segments[replicatedSeg].Owner == owner,
		"segment %d's handoff was not held: %v", replicatedSeg, c.Map().Segments[replicatedSeg])

	rseg.mu.Unlock()
	paused = false
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
	seg2 := int32(-1)
	for _, s := range c.Map().Segments {
		if s.ID != replicatedSeg && s.Owner != nil && *s.Owner == owner {
			seg2 = s.ID
			break
		}
	}
	require.NotEqual(t, int32(-1), seg2, "no other segment owned by %d", owner)

	rseg := c.Node(replica).segments()[replicatedSeg]
	rseg.mu.Lock()
	paused := true
	defer func() {
		if paused {
			rseg.mu.Unlock()
		}
	}()
	_, err := mustDial(t, c.Addr(owner)).Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	require.Error(t, err, "a write its paused replica may hold was answered")
	held := make(chan error, 1)
	go func() { held <- c.MigrateSegment(ctx, replicatedSeg, replica) }()
	require.Eventually(t, func() bool { return inCutover(c, replicatedSeg) }, 10*time.Second, time.Millisecond)

	waiting := make(chan error, 1)
	go func() { waiting <- c.MigrateSegment(ctx, seg2, other) }()
	require.Never(t, func() bool { return inCutover(c, seg2) }, time.Second, 10*time.Millisecond,
		"segment %d went into cut-over behind segment %d's held handoff", seg2, replicatedSeg)

	rseg.mu.Unlock()
	paused = false
	require.NoError(t, <-held)
	require.NoError(t, <-waiting, "the second migration never ran once the first was done")
	require.Equal(t, other, *c.Map().Segments[seg2].Owner)
}

// inCutover reports whether the coordinator's map puts segment s in cut-over.
func inCutover(c *Cluster, s int32) bool {
	co := c.Coordinator()
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.m.Segments[s].Cutover
}
