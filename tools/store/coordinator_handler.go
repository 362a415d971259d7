package store

import (
	"context"
	"slices"
	"time"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// coordHandler serves the ZarisCoordinator service.
type coordHandler struct{ c *Coordinator }

var _ zarispeer.ZarisCoordinator = (*coordHandler)(nil)

// adminTimeout bounds a churn command that arrives over the wire.
const adminTimeout = 60 * time.Second

// Register admits a node.
func (h *coordHandler) Register(_ context.Context, req *zarispeer.RegisterRequest) (*zarispeer.PeerMap, error) {
	return h.c.register(req)
}

// Synced records that a learner holds a full copy of a segment. A copy handed out before
// the learner's latest addition to the segment may miss writes (the owner stops forwarding to
// a node that leaves the segment), so that learner is told to fetch again.
func (h *coordHandler) Synced(_ context.Context, req *zarispeer.SyncedRequest) (*zarispeer.SyncedResponse, error) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &zarispeer.SyncedResponse{}
	rec := c.nodes[req.NodeId]
	if rec == nil || !rec.alive || rec.incarnation != req.Incarnation || req.Segment < 0 || req.Segment >= c.cfg.Segments {
		return resp, nil
	}
	sg := c.m.Segments[req.Segment]
	key := syncKey{req.Segment, req.NodeId}
	// The copy's owner must own the segment still, or be the last owner of a segment left
	// without one (the report raced with the owner's failover).
	from := ownerOf(sg)
	if from == noOwner {
		from = c.lastOwner[req.Segment].id
	}
	if !slices.Contains(sg.Learners, req.NodeId) || from != req.Owner || from <= 0 {
		return resp, nil
	}
	if req.FetchEpoch < c.learnerAt[key] {
		resp.Refetch = true
		return resp, nil
	}
	c.synced[key] = req.Owner
	c.kickReconcile()
	return resp, nil
}

// GetMap returns the current map.
func (h *coordHandler) GetMap(_ context.Context) (*zarispeer.PeerMap, error) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.m, nil
}

func (h *coordHandler) admin(ctx context.Context, op func(context.Context) error) (*zarispeer.PeerMap, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	if err := op(ctx); err != nil {
		return nil, err
	}
	return h.GetMap(ctx)
}

// Failback runs Coordinator.Failback.
func (h *coordHandler) Failback(ctx context.Context, id int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.Failback(ctx, id) })
}

// Leave runs Coordinator.Leave.
func (h *coordHandler) Leave(ctx context.Context, id int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.Leave(ctx, id) })
}

// MigrateSegment runs Coordinator.MigrateSegment.
func (h *coordHandler) MigrateSegment(ctx context.Context, seg, to int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.MigrateSegment(ctx, seg, to) })
}
