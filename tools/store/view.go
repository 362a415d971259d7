package store

import (
	"net"
	"slices"
	"strconv"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// noOwner marks a segment without an active owner.
const noOwner int32 = -1

// segView is one segment of a parsed map.
type segView struct {
	owner         int32
	replicas      []int32
	learners      []int32
	transitioning bool
	migrating     bool
	cutover       bool
}

func (s *segView) isReplica(id int32) bool { return slices.Contains(s.replicas, id) }
func (s *segView) isLearner(id int32) bool { return slices.Contains(s.learners, id) }

// view is a parsed, immutable PeerMap: what one node (or the coordinator) believes.
type view struct {
	pm       *zarispeer.PeerMap
	epoch    int64
	segCount int32
	segs     []segView
	peerAddr map[int32]string
	public   *zaris.ClusterMap
}

func newView(pm *zarispeer.PeerMap) *view {
	v := &view{
		pm:       pm,
		epoch:    pm.Epoch,
		segCount: pm.SegmentCount,
		segs:     make([]segView, len(pm.Segments)),
		peerAddr: make(map[int32]string, len(pm.Nodes)),
		public:   publicMap(pm),
	}
	for _, n := range pm.Nodes {
		v.peerAddr[n.ID] = n.PeerAddr
	}
	for i, s := range pm.Segments {
		sv := segView{
			owner:         noOwner,
			replicas:      s.Replicas,
			learners:      s.Learners,
			transitioning: s.Transitioning,
			migrating:     s.Migrating,
			cutover:       s.Cutover,
		}
		if s.Owner != nil {
			sv.owner = *s.Owner
		}
		v.segs[i] = sv
	}
	return v
}

// route answers the data-path question "may node me serve this op on segment seg?" in this
// order: no owner → Unavailable; a write in cut-over → Migrating; a read at an owner whose
// right to serve was revoked (cut-over) → Unavailable; the owner → Ok (serve); a write at a
// replica → ReplicaWriteRejected; a handoff in flight → OwnershipChanging; otherwise Moved.
func (v *view) route(seg int32, me int32, write bool) zaris.KvStatus {
	s := &v.segs[seg]
	switch {
	case s.owner == noOwner:
		return zaris.KvStatus_Unavailable
	case write && s.cutover:
		return zaris.KvStatus_Migrating
	case s.owner == me && s.cutover:
		return zaris.KvStatus_Unavailable
	case s.owner == me:
		return zaris.KvStatus_Ok
	case write && s.isReplica(me):
		return zaris.KvStatus_ReplicaWriteRejected
	case s.transitioning:
		return zaris.KvStatus_OwnershipChanging
	}
	return zaris.KvStatus_Moved
}

// publicMap converts the store's map to the cluster map clients see.
func publicMap(pm *zarispeer.PeerMap) *zaris.ClusterMap {
	cm := &zaris.ClusterMap{
		Epoch:        pm.Epoch,
		SegmentCount: pm.SegmentCount,
		Nodes:        make([]*zaris.NodeInfo, 0, len(pm.Nodes)),
		Segments:     make([]*zaris.SegmentInfo, 0, len(pm.Segments)),
	}
	for _, n := range pm.Nodes {
		cm.Nodes = append(cm.Nodes, &zaris.NodeInfo{ID: n.ID, Host: n.Host, Port: n.Port})
	}
	for _, s := range pm.Segments {
		si := &zaris.SegmentInfo{
			ID:            s.ID,
			Replicas:      slices.Clone(s.Replicas),
			Transitioning: s.Transitioning,
			Migrating:     s.Migrating || s.Cutover,
		}
		if si.Replicas == nil {
			si.Replicas = []int32{}
		}
		if s.Owner != nil {
			o := *s.Owner
			si.Owner = &o
		}
		cm.Segments = append(cm.Segments, si)
	}
	return cm
}

// cloneMap deep-copies a PeerMap so the copy can be edited while the original is shared.
func cloneMap(pm *zarispeer.PeerMap) *zarispeer.PeerMap {
	c := &zarispeer.PeerMap{
		Epoch:        pm.Epoch,
		ClusterId:    pm.ClusterId,
		SegmentCount: pm.SegmentCount,
		Nodes:        make([]*zarispeer.PeerNode, len(pm.Nodes)),
		Segments:     make([]*zarispeer.PeerSegment, len(pm.Segments)),
	}
	for i, n := range pm.Nodes {
		nn := *n
		c.Nodes[i] = &nn
	}
	for i, s := range pm.Segments {
		ss := *s
		if s.Owner != nil {
			o := *s.Owner
			ss.Owner = &o
		}
		ss.Replicas = slices.Clone(s.Replicas)
		ss.Learners = slices.Clone(s.Learners)
		if ss.Replicas == nil {
			ss.Replicas = []int32{}
		}
		if ss.Learners == nil {
			ss.Learners = []int32{}
		}
		c.Segments[i] = &ss
	}
	return c
}

// ownerOf returns the segment's owner or noOwner.
func ownerOf(s *zarispeer.PeerSegment) int32 {
	if s.Owner == nil {
		return noOwner
	}
	return *s.Owner
}

// setOwner sets (or, with noOwner, clears) the segment's owner.
func setOwner(s *zarispeer.PeerSegment, id int32) {
	if id == noOwner {
		s.Owner = nil
		return
	}
	s.Owner = &id
}

// isMember reports whether id is the segment's owner, a replica or a learner.
func isMember(s *zarispeer.PeerSegment, id int32) bool {
	return ownerOf(s) == id || slices.Contains(s.Replicas, id) || slices.Contains(s.Learners, id)
}

// remove returns list without id.
func remove(list []int32, id int32) []int32 {
	return slices.DeleteFunc(list, func(x int32) bool { return x == id })
}

// splitHostPort splits a host:port into the host and the numeric port.
func splitHostPort(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, err
	}
	return host, int32(port), nil
}
