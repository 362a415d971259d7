package store

import (
	"slices"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
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
				c.newTenureLocked(sg)
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
	started := false
	for s, sg := range c.m.Segments {
		w := &c.want[s]
		if w.owner == noOwner {
			continue
		}
		if w.owner == ownerOf(sg) && !sg.Cutover && !sg.Transitioning {
			w.owner = noOwner
			continue
		}
		if c.handoffReadyLocked(int32(s)) && !c.handingOffFromLocked(ownerOf(sg)) {
			started = c.startHandoffLocked(int32(s), ownerOf(sg), func() { c.handoff(int32(s)) }) || started
		}
	}
	c.mu.Unlock()
	return changed || started
}

// startHandoffLocked runs handoff, the handoff of segment s from its old owner from, in the
// background unless one of s runs already, and reports whether it started it. A handoff can
// wait as long as its old owner does not confirm the cut-over (a write it sees through to a
// copy it cannot reach), so each runs on its own: a held one holds back no segment another
// node owns. The reconcile loop runs again once it ended. Callers hold c.mu.
func (c *Coordinator) startHandoffLocked(s, from int32, handoff func()) bool {
	if _, running := c.handingOff[s]; running {
		return false
	}
	c.handingOff[s] = from
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		handoff()
		c.mu.Lock()
		delete(c.handingOff, s)
		c.mu.Unlock()
		c.kickReconcile()
	}()
	return true
}

// handingOffFromLocked reports whether a handoff from owner runs. The reconcile loop starts
// one at a time per old owner: an owner confirms a map as a whole, so while one of its
// cut-overs is held (a write it sees through), a second revoked segment would only wait in
// its cut-over, unserved, instead of serving until the first is done. Callers hold c.mu.
func (c *Coordinator) handingOffFromLocked(owner int32) bool {
	for _, from := range c.handingOff {
		if from == owner {
			return true
		}
	}
	return false
}

// newTenureLocked is called when segment sg of the map about to be published gets an owner
// (another node, or the same one again after it lost the segment). An owner forwards its
// writes only to the learners that fetched from it since it became owner, so a copy a learner
// fetched before may miss writes the owner acknowledges from now on, whether the learner
// reported it yet or not: every learner of sg must fetch again (Synced answers Refetch to a
// copy fetched at an earlier epoch). Callers hold c.mu.
func (c *Coordinator) newTenureLocked(sg *zarispeer.PeerSegment) {
	for _, l := range sg.Learners {
		k := syncKey{sg.ID, l}
		c.learnerAt[k] = c.m.Epoch + 1 // the epoch of the map published next
		delete(c.synced, k)
	}
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

// handoff moves segment s to its wanted owner, fenced: no map names the new owner before the
// old one stopped serving the segment. The steps, each a map (or a wait) of its own:
//
//  1. revoke: the segment goes into cut-over; its owner answers writes Migrating and reads
//     Unavailable (revokeLocked);
//  2. confirm: the old owner installed that map, or its etcd lease is gone and it was failed
//     over (awaitRevoked);
//  3. publish: migration (join, leave, MigrateSegment) names the new owner and ends the
//     cut-over; the old owner keeps a copy only if it is still wanted, else it answers Moved.
//     Failback names the new owner with the segment marked transitioning (non-owners answer
//     OwnershipChanging), pushes that to every node, then clears the mark.
//
// The target is an in-sync replica, and a replica only applies writes from the owner its own
// map names, so no acknowledged write is lost whichever order the nodes learn the maps in.
func (c *Coordinator) handoff(s int32) {
	c.mu.Lock()
	if !c.handoffReadyLocked(s) {
		c.mu.Unlock()
		return
	}
	w := c.want[s]
	from, to := ownerOf(c.m.Segments[s]), w.owner
	old := c.nodes[from]
	revoked, err := c.revokeLocked(s)
	hold := c.hold
	c.mu.Unlock()
	if err != nil {
		return
	}
	c.completeHandoff(s, w, from, to, old, revoked, hold)
}

// completeHandoff runs the confirm and publish steps of a handoff of segment s from from to
// to whose revoke step published revoked (see handoff).
func (c *Coordinator) completeHandoff(s int32, w segWant, from, to int32, old *nodeRec, revoked *zarispeer.PeerMap, hold chan struct{}) {
	if !c.awaitRevoked(old, revoked) {
		return
	}
	if w.kind == kindMigrate && hold != nil {
		select {
		case <-hold:
		case <-c.ctx.Done():
			return
		}
	}

	c.mu.Lock()
	sg := c.m.Segments[s]
	if ownerOf(sg) != from || !sg.Cutover {
		c.mu.Unlock()
		return // a failover intervened and already ended the cut-over
	}
	m := cloneMap(c.m)
	ms := m.Segments[s]
	ms.Cutover = false
	moved := c.liveLocked(to) && slices.Contains(ms.Replicas, to)
	if moved {
		setOwner(ms, to)
		ms.Replicas = remove(ms.Replicas, to)
		c.newTenureLocked(ms)
		if w.kind == kindFailback || slices.Contains(c.want[s].members, from) {
			ms.Replicas = append(ms.Replicas, from)
		}
		ms.Transitioning = w.kind == kindFailback
		if w.kind == kindMigrate {
			c.want[s].owner = noOwner
		}
	}
	if err := c.publishLocked(m); err != nil || !moved || w.kind != kindFailback {
		c.mu.Unlock()
		return
	}
	recs := c.liveRecsLocked()
	c.mu.Unlock()

	c.pushAll(recs, m)
	if hold != nil {
		select {
		case <-hold:
		case <-c.ctx.Done():
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sg := c.m.Segments[s]; ownerOf(sg) != to || !sg.Transitioning {
		return // a failover intervened and already cleared the mark
	}
	m3 := cloneMap(c.m)
	m3.Segments[s].Transitioning = false
	c.want[s].owner = noOwner
	c.publishLocked(m3)
}

// revokeLocked is the first step of a handoff: it publishes a map that puts segment s in
// cut-over, revoking its owner's right to serve it, and returns that map. Callers hold c.mu.
func (c *Coordinator) revokeLocked(s int32) (*zarispeer.PeerMap, error) {
	m := cloneMap(c.m)
	m.Segments[s].Cutover = true
	err := c.publishLocked(m)
	return m, err
}

// awaitRevoked is the second step of a handoff: it pushes the revoking map m to the old owner
// and returns once the owner confirmed m or a newer map, or once it was failed over: its
// etcd lease is gone (it expired, or the coordinator revoked it and waited its TTL out), so
// it no longer serves. It reports false when the coordinator closes.
func (c *Coordinator) awaitRevoked(owner *nodeRec, m *zarispeer.PeerMap) bool {
	c.pushAll([]*nodeRec{owner}, m)
	return c.waitUntil(c.ctx, func() (bool, error) {
		return owner.known >= m.Epoch || !owner.alive, nil
	}) == nil
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
