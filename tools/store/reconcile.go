package store

import (
	"slices"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zarispeer"
)

// restartOwnerlessLocked picks the node that takes a segment without any copy: a learner
// that reported a full copy from the owner it had last; the process that owned it last, if
// it is live again with its memory; otherwise, once that process is
// known to be gone (it came back as a new incarnation, or it never owned it), the first live
// wanted member, starting the segment afresh: its data was lost with its last copy. While the
// last owner may still come back, the segment stays without owner (Unavailable).
func (c *Coordinator) restartOwnerlessLocked(s int) (int32, bool) {
	if last := c.lastOwner[s]; last.id != 0 {
		// A learner whose report of a full copy from the last owner came in after that
		// owner was failed over holds every write the owner acknowledged.
		if l := c.syncedLearnerLocked(c.m.Segments[s], last.id); l != noOwner {
			return l, true
		}
		r := c.nodes[last.id]
		if r == nil || !r.alive {
			return noOwner, false
		}
		if r.incarnation == last.incarnation {
			return last.id, true
		}
	}
	for _, id := range c.want[s].members {
		if c.liveLocked(id) {
			return id, true
		}
	}
	return noOwner, false
}

func (c *Coordinator) reconcileLoop() {
	defer c.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		for c.ctx.Err() == nil && c.reconcileOnce() {
		}
	}
}

// reconcileOnce moves the map one step towards c.want: it gives an ownerless segment a live
// member, adds missing members as learners, promotes learners that hold a full copy,
// drops copies no longer wanted once the wanted ones are in sync, and runs pending handoffs.
// It reports whether it changed anything.
func (c *Coordinator) reconcileOnce() bool {
	c.mu.Lock()
	if !c.initialized {
		c.mu.Unlock()
		return false
	}
	m := cloneMap(c.m)
	changed := false
	for s, sg := range m.Segments {
		w := &c.want[s]
		if ownerOf(sg) == noOwner {
			if id, ok := c.restartOwnerlessLocked(s); ok {
				setOwner(sg, id)
				sg.Replicas, sg.Learners = remove(sg.Replicas, id), remove(sg.Learners, id)
				delete(c.learnerAt, syncKey{int32(s), id})
				delete(c.synced, syncKey{int32(s), id})
				c.lastOwner[s] = ownerRef{}
				changed = true
			}
		}
		owner := ownerOf(sg)
		if owner == noOwner {
			continue
		}
		for _, id := range w.members {
			if c.liveLocked(id) && !isMember(sg, id) {
				sg.Learners = append(sg.Learners, id)
				c.learnerAt[syncKey{int32(s), id}] = c.m.Epoch + 1 // the epoch of the map published below
				delete(c.synced, syncKey{int32(s), id})
				changed = true
			}
		}
		for _, id := range slices.Clone(sg.Learners) {
			if from, ok := c.synced[syncKey{int32(s), id}]; ok && from == owner {
				sg.Learners = remove(sg.Learners, id)
				sg.Replicas = append(sg.Replicas, id)
				delete(c.synced, syncKey{int32(s), id})
				delete(c.learnerAt, syncKey{int32(s), id})
				changed = true
			}
		}
		inSync := true
		for _, id := range w.members {
			if c.liveLocked(id) && id != owner && !slices.Contains(sg.Replicas, id) {
				inSync = false
			}
		}
		if inSync {
			for _, id := range append(slices.Clone(sg.Replicas), sg.Learners...) {
				if !slices.Contains(w.members, id) {
					sg.Replicas, sg.Learners = remove(sg.Replicas, id), remove(sg.Learners, id)
					delete(c.learnerAt, syncKey{int32(s), id})
					changed = true
				}
			}
		}
	}
	if changed {
		c.publishLocked(m)
	}
	var picks []int32
	for s, sg := range c.m.Segments {
		w := &c.want[s]
		if w.owner == noOwner {
			continue
		}
		if w.owner == ownerOf(sg) && !sg.Cutover && !sg.Transitioning {
			w.owner = noOwner
			continue
		}
		if c.handoffReadyLocked(int32(s)) {
			picks = append(picks, int32(s))
		}
	}
	c.mu.Unlock()
	for _, s := range picks {
		c.handoff(s)
	}
	return changed || len(picks) > 0
}

// handoffReadyLocked reports whether segment s can be handed to its wanted owner now: both
// ends live, the target an in-sync replica, and no handoff of s in flight.
func (c *Coordinator) handoffReadyLocked(s int32) bool {
	sg := c.m.Segments[s]
	w := c.want[s]
	o := ownerOf(sg)
	return w.owner != noOwner && o != noOwner && w.owner != o && c.liveLocked(o) && c.liveLocked(w.owner) &&
		slices.Contains(sg.Replicas, w.owner) && !sg.Cutover && !sg.Transitioning
}

// handoff moves segment s to its wanted owner in two maps. Migration: first a cut-over
// (writes answer Migrating while the owner finishes those in flight), then the new owner;
// the old owner keeps a copy only if it is still wanted, else it answers Moved. Failback:
// first the new owner with the segment marked transitioning (non-owners answer
// OwnershipChanging) pushed to every node, then the mark cleared. The target is an in-sync
// replica, and a replica only applies writes from the owner its own map names, so no
// acknowledged write is lost whichever order the nodes learn the maps in.
func (c *Coordinator) handoff(s int32) {
	c.mu.Lock()
	if !c.handoffReadyLocked(s) {
		c.mu.Unlock()
		return
	}
	w := c.want[s]
	from, to := ownerOf(c.m.Segments[s]), w.owner
	m1 := cloneMap(c.m)
	s1 := m1.Segments[s]
	if w.kind == kindFailback {
		setOwner(s1, to)
		s1.Replicas = append(remove(s1.Replicas, to), from)
		s1.Transitioning = true
	} else {
		s1.Cutover = true
	}
	c.publishLocked(m1)
	recs := []*nodeRec{c.nodes[from]}
	if w.kind == kindFailback {
		recs = nil
		for _, r := range c.nodes {
			if r.alive {
				recs = append(recs, r)
			}
		}
	}
	hold := c.hold
	c.mu.Unlock()

	c.pushAll(recs, m1)
	if hold != nil {
		select {
		case <-hold:
		case <-c.ctx.Done():
			return
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	sg := c.m.Segments[s]
	if w.kind == kindFailback {
		if ownerOf(sg) != to || !sg.Transitioning {
			return // a failover intervened and already cleared the mark
		}
		m2 := cloneMap(c.m)
		m2.Segments[s].Transitioning = false
		c.want[s].owner = noOwner
		c.publishLocked(m2)
		return
	}
	if ownerOf(sg) != from || !sg.Cutover {
		return
	}
	m2 := cloneMap(c.m)
	s2 := m2.Segments[s]
	s2.Cutover = false
	if c.liveLocked(to) && slices.Contains(s2.Replicas, to) {
		setOwner(s2, to)
		s2.Replicas = remove(s2.Replicas, to)
		if slices.Contains(c.want[s].members, from) {
			s2.Replicas = append(s2.Replicas, from)
		}
		c.want[s].owner = noOwner
	}
	c.publishLocked(m2)
}

// pushAll pushes m to the given nodes in parallel and waits (each at most FailureTimeout).
func (c *Coordinator) pushAll(recs []*nodeRec, m *zarispeer.PeerMap) {
	var wg sync.WaitGroup
	for _, r := range recs {
		if r == nil {
			continue
		}
		wg.Go(func() {
			var e int64
			err := c.pool.call(r.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				var err error
				e, err = zarispeer.NewZarisPeerClient(cl).PushMap(c.ctx, m, 0)
				return err
			})
			if err == nil {
				c.mu.Lock()
				r.known = max(r.known, e)
				c.mu.Unlock()
			}
		})
	}
	wg.Wait()
}
