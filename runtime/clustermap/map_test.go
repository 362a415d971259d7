package clustermap

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GetOwner is the segment's owner, and 0 for a segment without one or no segment at all.
func TestSegment_GetOwnerIsZeroWithoutAnOwner(t *testing.T) {
	var none *Segment
	assert.Zero(t, none.GetOwner())
	assert.Zero(t, (&Segment{ID: 1}).GetOwner())
	owner := int32(3)
	assert.Equal(t, int32(3), (&Segment{ID: 1, Owner: &owner}).GetOwner())
}

// Clone copies every field, and nothing of the copy is shared with the original: not the
// nodes, the segments, an owner or the replicas. A nil node or segment stays nil.
func TestMap_CloneIsDeep(t *testing.T) {
	one, two := int32(1), int32(2)
	m := &Map{
		Epoch: 7, SegmentCount: 3, MaxMessageBytes: 4 << 20, DedupWindowMs: 600000,
		Nodes: []*Node{{ID: 1, Host: "a", Port: 7001}, nil, {ID: 2, Host: "b", Port: 7002}},
		Segments: []*Segment{
			{ID: 0, Owner: &one, Replicas: []int32{1, 2}, Transitioning: true},
			nil,
			{ID: 2, Replicas: []int32{2}, Migrating: true},
		},
	}
	want, err := json.Marshal(m)
	require.NoError(t, err)

	c := m.Clone()
	got, err := json.Marshal(c)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.Nil(t, c.Nodes[1])
	assert.Nil(t, c.Segments[1])
	assert.Nil(t, c.Segments[2].Owner)

	c.Nodes[0].Host = "elsewhere"
	*c.Segments[0].Owner = two
	c.Segments[0].Replicas[0] = 9
	after, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(after), "changing the clone changed the original")

	// A map without nodes or segments clones to one without them, not to empty slices.
	bare := (&Map{Epoch: 1, SegmentCount: 1}).Clone()
	assert.Nil(t, bare.Nodes)
	assert.Nil(t, bare.Segments)
}
