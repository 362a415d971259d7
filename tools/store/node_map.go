package store

import (
	"errors"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// install makes pm the node's map if it is newer than the current one, and starts or stops
// per-segment work the new map asks for: learners fetch a copy. A node keeps the data of a
// segment it no longer holds (a node failed over while it was alive may be given its segment
// back intact); a copy it learns later replaces it.
func (n *Node) install(pm *zarispeer.PeerMap) bool {
	n.installMu.Lock()
	defer n.installMu.Unlock()
	cur := n.current.Load()
	if !n.sameCluster(pm.ClusterId) {
		return false
	}
	if cur != nil && (pm.Epoch <= cur.epoch || pm.SegmentCount != cur.segCount) {
		return false
	}
	if pm.SegmentCount <= 0 || len(pm.Segments) != int(pm.SegmentCount) {
		return false
	}
	v := newView(pm)
	v.public.MaxMessageBytes = thrift.Int64Ptr(int64(n.cfg.maxMessage())) // this node's data-port limit
	if !n.cfg.DisableDedup {
		v.public.DedupWindowMs = thrift.Int64Ptr(n.cfg.DedupWindow.Milliseconds()) // rule B8
	}
	segs := n.segments()
	if segs == nil {
		segs = make([]*segment, v.segCount)
		for i := range segs {
			segs[i] = &segment{data: make(map[string]entry), syncedFrom: noOwner}
		}
		n.segs.Store(&segs)
	}
	n.current.Store(v)
	old := n.changed.Load()
	ch := make(chan struct{})
	n.changed.Store(&ch)
	close(*old)

	me := n.cfg.ID
	for i := range v.segs {
		sv := &v.segs[i]
		seg := segs[i]
		seg.mu.Lock()
		switch {
		case sv.owner == me:
			for id := range seg.registered {
				if !sv.isLearner(id) {
					delete(seg.registered, id)
				}
			}
			seg.syncedFrom, seg.syncedEpoch = noOwner, 0
		case sv.isLearner(me):
			seg.registered = nil
			if sv.owner != noOwner && !seg.syncing && n.ctx.Err() == nil {
				seg.syncing = true
				n.wg.Add(1)
				go n.catchUp(int32(i), seg)
			}
		default: // a replica, or no copy at all
			seg.resetSync()
		}
		seg.mu.Unlock()
	}
	return true
}

// catchUp runs while this node is a learner of segment s: it fetches a copy from the owner
// (again whenever the owner changes) and reports to the coordinator that it holds one, until
// the coordinator makes it a replica or takes it off the segment.
func (n *Node) catchUp(s int32, seg *segment) {
	defer n.wg.Done()
	me := n.cfg.ID
	for {
		ch := n.changedCh()
		seg.mu.Lock()
		v := n.current.Load()
		sv := &v.segs[s]
		if n.ctx.Err() != nil || !sv.isLearner(me) {
			seg.syncing = false
			seg.mu.Unlock()
			return
		}
		synced := seg.syncedFrom == sv.owner && !seg.fetching
		syncedEpoch := seg.syncedEpoch
		seg.mu.Unlock()

		wait := 200 * time.Millisecond
		switch {
		case sv.owner == noOwner:
		case !synced:
			if err := n.fetch(v, s, seg); err != nil {
				n.cfg.Logger.Debug("fetch failed", "segment", s, "owner", sv.owner, "err", err)
				wait = retryPause
			} else {
				wait = 0
			}
		default:
			if n.reportSynced(s, sv.owner, syncedEpoch) {
				seg.mu.Lock()
				if seg.syncedFrom == sv.owner && seg.syncedEpoch == syncedEpoch {
					seg.syncedFrom, seg.syncedEpoch = noOwner, 0
				}
				seg.mu.Unlock()
				wait = 0
			}
		}
		if wait == 0 {
			continue
		}
		select {
		case <-n.ctx.Done():
		case <-ch:
		case <-time.After(wait):
		}
	}
}

// errRejected is a peer's refusal of a fetch or a write (its map disagrees).
var errRejected = errors.New("store: rejected by peer")

// fetch copies segment s from its owner in v, keeping writes the owner forwards meanwhile.
func (n *Node) fetch(v *view, s int32, seg *segment) error {
	owner := v.segs[s].owner
	addr := v.peerAddr[owner]
	seg.mu.Lock()
	seg.fetching = true
	seg.buffer = nil
	seg.syncedFrom = noOwner
	seg.mu.Unlock()

	var resp *zarispeer.FetchResponse
	err := n.pool.call(addr, 10*time.Second, func(c thrift.TClient) error {
		var err error
		resp, err = zarispeer.NewZarisPeerClient(c).Fetch(n.ctx, &zarispeer.FetchRequest{
			Learner: n.cfg.ID, Epoch: v.epoch, Segment: s, ClusterId: v.pm.ClusterId,
		})
		return err
	})
	if err == nil && resp.Status != zarispeer.PeerStatus_Ok {
		if resp.Status == zarispeer.PeerStatus_StaleReceiver {
			n.pushMap(addr, v.pm)
		}
		err = errRejected
	}
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if err != nil {
		seg.fetching = false
		seg.buffer = nil
		return err
	}
	// The copy holds every entry up to resp.Counter: the segment is stable there, so a
	// late or duplicated forwarded entry at or below it is refused.
	seg.data = make(map[string]entry, len(resp.Entries))
	seg.tombs = nil
	seg.stable = 0
	seg.outcomes = outcomes{}
	for _, e := range resp.Entries {
		seg.apply(e)
	}
	for _, o := range resp.Outcomes {
		n.remember(seg, o)
	}
	seg.counter = max(seg.counter, resp.Counter)
	seg.collect(resp.Counter)
	for _, e := range seg.buffer {
		seg.apply(e)
		n.remember(seg, e.Outcome)
	}
	seg.fetching = false
	seg.buffer = nil
	seg.syncedFrom = owner
	seg.syncedEpoch = resp.Epoch
	return nil
}

// reportSynced tells the coordinator this learner holds a copy of segment s fetched from
// owner at the owner's epoch fetchEpoch. It reports whether the coordinator wants the copy
// fetched again.
func (n *Node) reportSynced(s, owner int32, fetchEpoch int64) (refetch bool) {
	err := n.coords.call(n.pool, time.Second, func(c thrift.TClient) error {
		resp, err := zarispeer.NewZarisCoordinatorClient(c).Synced(n.ctx, &zarispeer.SyncedRequest{
			NodeId: n.cfg.ID, Incarnation: n.incarnation, Segment: s, Owner: owner, FetchEpoch: fetchEpoch,
		})
		if err == nil {
			refetch = resp.Refetch
		}
		return err
	})
	if err != nil {
		n.cfg.Logger.Debug("synced report failed", "segment", s, "err", err)
	}
	return refetch
}

// pushMap sends pm to the peer at addr (a peer whose map is older than ours).
func (n *Node) pushMap(addr string, pm *zarispeer.PeerMap) {
	_ = n.pool.call(addr, peerCallTimeout, func(c thrift.TClient) error {
		_, err := zarispeer.NewZarisPeerClient(c).PushMap(n.ctx, pm, 0)
		return err
	})
}

// pullMap installs the map of the peer at addr (a peer whose map is newer than ours).
func (n *Node) pullMap(addr string) {
	var pm *zarispeer.PeerMap
	err := n.pool.call(addr, peerCallTimeout, func(c thrift.TClient) error {
		var err error
		pm, err = zarispeer.NewZarisPeerClient(c).GetPeerMap(n.ctx)
		return err
	})
	if err == nil {
		n.install(pm)
	}
}
