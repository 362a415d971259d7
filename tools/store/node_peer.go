package store

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// peerHandler serves the ZarisPeer service of a node.
type peerHandler struct{ n *Node }

var _ zarispeer.ZarisPeer = (*peerHandler)(nil)

// Ping answers the coordinator's heartbeat with the node's process and confirmed epoch.
// The lease argument is not used: a node's right to serve comes from its etcd lease.
func (h *peerHandler) Ping(_ context.Context, _ int64, clusterID string, _ int64) (*zarispeer.PingResponse, error) {
	if !h.n.sameCluster(clusterID) {
		return nil, errOtherCluster
	}
	h.n.slow()
	return &zarispeer.PingResponse{NodeId: h.n.cfg.ID, Incarnation: h.n.incarnation, Epoch: h.n.confirmedEpoch()}, nil
}

// PushMap installs a newer map and returns the node's confirmed epoch. The lease argument
// is not used.
func (h *peerHandler) PushMap(_ context.Context, pm *zarispeer.PeerMap, _ int64) (int64, error) {
	if pm == nil {
		return 0, fmt.Errorf("store: PushMap without a map")
	}
	if !h.n.sameCluster(pm.ClusterId) {
		return 0, errOtherCluster
	}
	if err := h.n.committed(pm.Epoch); err != nil {
		return 0, err
	}
	h.n.slow()
	h.n.install(pm)
	// A write in flight on a segment pm puts in cut-over here is waited for a little, so the
	// coordinator does not push again at once for a confirmation still to come.
	return h.n.awaitConfirmed(h.n.cfg.CutoverWait / 2), nil
}

// maxEpochJump is how far beyond its own map's epoch a pushed map may go before a node
// checks it against etcd (committed).
const maxEpochJump = 64

// committed returns nil unless epoch jumps far (maxEpochJump) beyond the node's map and
// beyond the epoch the coordinator committed to etcd: every map the coordinator pushes is
// committed first, so such a map is none of this cluster's coordinator's, whoever sent it.
// Only a far jump costs an etcd read, so the maps of ordinary churn install at once.
func (n *Node) committed(epoch int64) error {
	if epoch <= n.Epoch()+maxEpochJump || epoch <= n.committedEpoch.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, peerCallTimeout/2)
	defer cancel()
	got, err := control.NewStateStore(n.cfg.Etcd, n.cfg.EtcdPrefix).Epoch(ctx)
	if err != nil {
		return fmt.Errorf("store: map of epoch %d: %w", epoch, err)
	}
	c := int64(got)
	for {
		old := n.committedEpoch.Load()
		if c <= old || n.committedEpoch.CompareAndSwap(old, c) {
			break
		}
	}
	if epoch > c {
		n.cfg.Logger.Warn("refused a map the coordinator never committed", "epoch", epoch, "committed", c)
		return fmt.Errorf("store: map of epoch %d refused: the cluster committed epoch %d", epoch, c)
	}
	return nil
}

// GetPeerMap returns the node's current map.
func (h *peerHandler) GetPeerMap(_ context.Context) (*zarispeer.PeerMap, error) {
	v := h.n.current.Load()
	if v == nil {
		return &zarispeer.PeerMap{Nodes: []*zarispeer.PeerNode{}, Segments: []*zarispeer.PeerSegment{}}, nil
	}
	return v.pm, nil
}

// dropsAny reports whether the current map no longer asks this node, as owner of segment s,
// to send writes to one of targets that has not acknowledged yet.
func (n *Node) dropsAny(s int32, targets []int32, acked map[int32]bool) bool {
	v := n.current.Load()
	sv := &v.segs[s]
	if sv.owner != n.cfg.ID {
		return true
	}
	for _, t := range targets {
		if !acked[t] && !sv.isReplica(t) && !sv.isLearner(t) {
			return true
		}
	}
	return false
}

// acceptsFrom reports whether, in v, sender owns segment s and this node holds a copy of it.
func (n *Node) acceptsFrom(v *view, s int32, sender int32) bool {
	sv := &v.segs[s]
	me := n.cfg.ID
	return sv.owner == sender && sender != me && (sv.isReplica(me) || sv.isLearner(me))
}

func (n *Node) segmentIndex(v *view, s int32) error {
	if v == nil || s < 0 || s >= v.segCount {
		return fmt.Errorf("store: no segment %d", s)
	}
	return nil
}

// Replicate applies one write of the segment's owner.
func (h *peerHandler) Replicate(_ context.Context, req *zarispeer.ReplicateRequest) (*zarispeer.ReplicateResponse, error) {
	n := h.n
	if !n.sameCluster(req.ClusterId) {
		return nil, errOtherCluster
	}
	v := n.current.Load()
	if v == nil || req.Epoch > v.epoch {
		return &zarispeer.ReplicateResponse{Status: zarispeer.PeerStatus_StaleReceiver, Epoch: n.Epoch()}, nil
	}
	if err := n.segmentIndex(v, req.Segment); err != nil || req.Entry == nil {
		return nil, fmt.Errorf("store: bad replication request")
	}
	if !n.acceptsFrom(v, req.Segment, req.Sender) {
		return &zarispeer.ReplicateResponse{Status: zarispeer.PeerStatus_Rejected, Epoch: v.epoch}, nil
	}
	seg := n.segments()[req.Segment]
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if v = n.current.Load(); !n.acceptsFrom(v, req.Segment, req.Sender) {
		return &zarispeer.ReplicateResponse{Status: zarispeer.PeerStatus_Rejected, Epoch: v.epoch}, nil
	}
	if seg.fetching {
		seg.buffer = append(seg.buffer, req.Entry)
	} else {
		seg.apply(req.Entry)
		n.remember(seg, req.Entry.Outcome)
		seg.collect(req.GetStable())
	}
	return &zarispeer.ReplicateResponse{Status: zarispeer.PeerStatus_Ok, Epoch: v.epoch}, nil
}

// Fetch hands a learner a copy of a segment this node owns and registers the learner for
// every later write. The copy is taken between two writes, so the copy plus the forwarded
// writes is exactly the owner's state.
func (h *peerHandler) Fetch(_ context.Context, req *zarispeer.FetchRequest) (*zarispeer.FetchResponse, error) {
	n := h.n
	if !n.sameCluster(req.ClusterId) {
		return nil, errOtherCluster
	}
	me := n.cfg.ID
	v := n.current.Load()
	if v == nil || req.Epoch > v.epoch {
		return &zarispeer.FetchResponse{Status: zarispeer.PeerStatus_StaleReceiver, Epoch: n.Epoch(), Entries: []*zarispeer.Entry{}}, nil
	}
	if err := n.segmentIndex(v, req.Segment); err != nil {
		return nil, err
	}
	ok := func(v *view) bool {
		sv := &v.segs[req.Segment]
		return sv.owner == me && (sv.isLearner(req.Learner) || sv.isReplica(req.Learner))
	}
	rejected := func(v *view) (*zarispeer.FetchResponse, error) {
		return &zarispeer.FetchResponse{Status: zarispeer.PeerStatus_Rejected, Epoch: v.epoch, Entries: []*zarispeer.Entry{}}, nil
	}
	if !ok(v) {
		return rejected(v)
	}
	seg := n.segments()[req.Segment]
	// A write being seen through holds the lock until its copies answer, however long: wait
	// as a write does, at most ReplicationTimeout, and let the learner ask again.
	timer := time.NewTimer(n.cfg.ReplicationTimeout)
	defer timer.Stop()
	if !seg.writeMu.lockUnless(timer.C, n.ctx.Done()) {
		return nil, fmt.Errorf("store: segment %d: a write is still being replicated", req.Segment)
	}
	defer seg.writeMu.Unlock()
	if v = n.current.Load(); !ok(v) {
		return rejected(v)
	}
	seg.mu.Lock()
	defer seg.mu.Unlock()
	entries := make([]*zarispeer.Entry, 0, len(seg.data))
	for k, e := range seg.data {
		entries = append(entries, &zarispeer.Entry{Key: []byte(k), Value: e.value, Version: e.version, Deleted: e.deleted})
	}
	if seg.registered == nil {
		seg.registered = make(map[int32]bool)
	}
	seg.registered[req.Learner] = true
	return &zarispeer.FetchResponse{Status: zarispeer.PeerStatus_Ok, Epoch: v.epoch, Counter: seg.counter, Entries: entries,
		Outcomes: seg.outcomes.list(n.cfg.Clock.Mono(), n.cfg.DedupWindow)}, nil
}

// replicate sends e, a write to segment s that this node owns, to every replica and
// registered learner of the segment, and returns once all of them applied it (Ok) or once the
// node must not apply it: its map no longer makes it the segment's owner (the status to
// answer), or p was abandoned before anything was sent (Unavailable). A cut-over does not
// end it: the coordinator confirms the cut-over only once it is over (confirmedEpoch).
// inDoubt reports that some copy may hold the write although it failed: the node must then
// not answer a status (a client takes a status other than Ok for "not applied" and replays
// even a non-idempotent write); it drops the request unanswered, which a client treats as a
// write whose outcome is unknown. An unreachable replica holds the write until the
// coordinator's next map drops it; the write then completes with the remaining copies.
// Callers hold seg.writeMu.
func (n *Node) replicate(s int32, seg *segment, e *zarispeer.Entry, p *pendingWrite) (_ *view, _ zaris.KvStatus, inDoubt bool) {
	me := n.cfg.ID
	ctx := n.ctx
	acked := make(map[int32]bool)
	for {
		ch := n.changedCh()
		v := n.current.Load()
		if v.segs[s].owner != me {
			return v, v.route(s, me, true), inDoubt
		}
		sv := &v.segs[s]
		var targets []int32
		for _, r := range sv.replicas {
			if r != me && !acked[r] {
				targets = append(targets, r)
			}
		}
		seg.mu.Lock()
		for _, l := range sv.learners {
			if seg.registered[l] && !acked[l] {
				targets = append(targets, l)
			}
		}
		seg.mu.Unlock()
		if len(targets) == 0 {
			return v, zaris.KvStatus_Ok, false
		}
		if !p.send(len(targets)) {
			return v, zaris.KvStatus_Unavailable, inDoubt
		}

		// Each copy is sent in its own goroutine. Should a newer map drop a copy still
		// being waited for (a hung node failed over), the round ends without it; the call
		// left behind finishes on its own within peerCallTimeout.
		type result struct {
			target int32
			resp   *zarispeer.ReplicateResponse
			err    error
		}
		seg.mu.Lock()
		stable := seg.stable
		seg.mu.Unlock()
		req := &zarispeer.ReplicateRequest{Sender: me, Epoch: v.epoch, Segment: s, Entry: e, ClusterId: v.pm.ClusterId, Stable: &stable}
		results := make(chan result, len(targets))
		for _, t := range targets {
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				r := result{target: t}
				r.err = n.pool.call(v.peerAddr[t], peerCallTimeout, func(c thrift.TClient) error {
					var err error
					r.resp, err = zarispeer.NewZarisPeerClient(c).Replicate(ctx, req)
					return err
				})
				p.sent(r.err == nil && r.resp.Status == zarispeer.PeerStatus_Ok || r.err != nil && !notSent(r.err))
				results <- r
			}()
		}

		retryNow, allAcked := true, true
		pending, abandoned := len(targets), false
		for waiting := ch; pending > 0 && !abandoned; {
			select {
			case r := <-results:
				pending--
				switch {
				case r.err != nil:
					retryNow, allAcked = false, false
					inDoubt = inDoubt || !notSent(r.err) // it may have arrived
				case r.resp.Status == zarispeer.PeerStatus_Ok:
					acked[r.target] = true
					inDoubt = true
				case r.resp.Status == zarispeer.PeerStatus_StaleReceiver:
					allAcked = false
					n.pushMap(v.peerAddr[r.target], v.pm)
				default: // Rejected: the peer's map disagrees; a newer one settles it.
					allAcked = false
					if r.resp.Epoch > v.epoch {
						n.pullMap(v.peerAddr[r.target])
					}
					if n.Epoch() <= v.epoch {
						retryNow = false // no newer map to retry with: wait for one
					}
				}
			case <-waiting:
				waiting = n.changedCh()
				if n.dropsAny(s, targets, acked) {
					abandoned, allAcked, inDoubt = true, false, true
				}
			case <-ctx.Done():
				return v, zaris.KvStatus_Unavailable, true
			}
		}
		if abandoned {
			continue
		}
		if allAcked {
			// Every copy of the map this round started from has the write, and any node that
			// could own the segment next is among them (only an in-sync copy becomes owner, and
			// it accepts writes only from the owner its map names): the write is safe to
			// acknowledge even if a newer map arrived meanwhile.
			return v, zaris.KvStatus_Ok, false
		}
		if retryNow {
			continue
		}
		select {
		case <-ctx.Done():
			return v, zaris.KvStatus_Unavailable, true
		case <-ch:
		case <-time.After(retryPause):
		}
	}
}
