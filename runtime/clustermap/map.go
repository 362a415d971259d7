package clustermap

import "slices"

// Map is a cluster map as the engine routes by it: which node owns which segment of
// the key space. The generated Service.FetchMap converts the IDL's map struct into it (the
// shape zarisgen checks: see tools/zarisgen/README.md); it encodes to JSON as the IDL's
// does. A map with a higher epoch is newer.
type Map struct {
	// Epoch orders maps: a higher one is newer.
	Epoch int64 `json:"epoch"`
	// SegmentCount is the number of segments; segment(key) = CRC-32 (IEEE) of key mod it.
	SegmentCount int32 `json:"segmentCount"`
	// Nodes are the cluster's nodes.
	Nodes []*Node `json:"nodes"`
	// Segments has one entry per segment, 0..SegmentCount-1 in any order.
	Segments []*Segment `json:"segments"`
	// MaxMessageBytes is the largest request, in bytes, the answering node takes, if the
	// IDL's map carries it; 0 when the node does not say. The client refuses to send a
	// larger request (runtime.ErrRequestTooLarge) on pipelined connections and on pooled framed
	// binary and framed compact ones of the built-in Dialer (for compact, a generated
	// operation's); over the others it sends it, and the node refuses it.
	MaxMessageBytes int64 `json:"maxMessageBytes,omitempty"`
	// DedupWindowMs is how long, in milliseconds, the store keeps the first outcome of a
	// tokened write and answers a replay with it, if the IDL's map carries it; 0 when it
	// keeps none, and a tokened write that may have been applied is then not replayed
	// (rule B8).
	DedupWindowMs int64 `json:"dedupWindowMs,omitempty"`
}

// Node is one node of a Map.
type Node struct {
	// ID is the node's id.
	ID int32 `json:"id"`
	// Host and Port are where the node listens.
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// Segment says who serves one segment of a Map.
type Segment struct {
	// ID is the segment's number.
	ID int32 `json:"id"`
	// Owner is the node serving reads and writes; nil when the segment has no live owner.
	Owner *int32 `json:"owner,omitempty"`
	// Replicas are the nodes holding a copy, if the IDL's map carries them.
	Replicas []int32 `json:"replicas"`
	// Transitioning and Migrating tell a hand-over or a copy to a new owner in progress,
	// if the IDL's map carries them.
	Transitioning bool `json:"transitioning"`
	Migrating     bool `json:"migrating"`
}

// GetOwner returns the owner's id, or 0 when the segment has none.
func (s *Segment) GetOwner() int32 {
	if s == nil || s.Owner == nil {
		return 0
	}
	return *s.Owner
}

// Clone returns a deep copy of m.
func (m *Map) Clone() *Map {
	c := &Map{Epoch: m.Epoch, SegmentCount: m.SegmentCount, MaxMessageBytes: m.MaxMessageBytes, DedupWindowMs: m.DedupWindowMs}
	if m.Nodes != nil {
		c.Nodes = make([]*Node, len(m.Nodes))
		for i, n := range m.Nodes {
			if n != nil {
				nn := *n
				c.Nodes[i] = &nn
			}
		}
	}
	if m.Segments != nil {
		c.Segments = make([]*Segment, len(m.Segments))
		for i, s := range m.Segments {
			if s == nil {
				continue
			}
			ss := *s
			if s.Owner != nil {
				o := *s.Owner
				ss.Owner = &o
			}
			ss.Replicas = slices.Clone(s.Replicas)
			c.Segments[i] = &ss
		}
	}
	return c
}
