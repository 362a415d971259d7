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
	require.Eventually(t, func() bool { return c.Map().Segments[replicatedSeg].Migrating }, 10*time.Second, time.Millisecond,
		"the migration of segment %d never started its cut-over", replicatedSeg)

	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.MigrateSegment(within, seg2, owner), "the migration of segment %d waited for segment %d's", seg2, replicatedSeg)
	s := c.Map().Segments[replicatedSeg]
	require.True(t, s.Migrating && *s.Owner == owner, "segment %d's handoff was not held: %v", replicatedSeg, s)

	rseg.mu.Unlock()
	paused = false
	require.NoError(t, <-held)
	require.Equal(t, replica, *c.Map().Segments[replicatedSeg].Owner)
}
