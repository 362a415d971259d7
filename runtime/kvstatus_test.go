package runtime

import (
	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// kvStatus is the status of a generated response, as the IDL's enum.
func kvStatus(resp Response) zaris.KvStatus {
	if r, ok := resp.(interface{ GetStatus() zaris.KvStatus }); ok {
		return r.GetStatus()
	}
	return -1
}

// statusOf is Op.Status of the test ops.
func statusOf(resp Response) Status { return Status(kvStatus(resp)) }

// fromIDL converts the IDL's map into the engine's, as the generated Service.FetchMap does.
func fromIDL(m *zaris.ClusterMap) *clustermap.Map {
	if m == nil {
		return nil
	}
	c := &clustermap.Map{Epoch: m.Epoch, SegmentCount: m.SegmentCount, MaxMessageBytes: m.GetMaxMessageBytes(), DedupWindowMs: m.GetDedupWindowMs()}
	if m.Nodes != nil {
		c.Nodes = make([]*clustermap.Node, len(m.Nodes))
	}
	for i, n := range m.Nodes {
		if n != nil {
			c.Nodes[i] = &clustermap.Node{ID: n.ID, Host: n.Host, Port: n.Port}
		}
	}
	if m.Segments != nil {
		c.Segments = make([]*clustermap.Segment, len(m.Segments))
	}
	for i, s := range m.Segments {
		if s != nil {
			c.Segments[i] = &clustermap.Segment{ID: s.ID, Owner: s.Owner, Replicas: s.Replicas, Transitioning: s.Transitioning, Migrating: s.Migrating}
		}
	}
	return c
}
