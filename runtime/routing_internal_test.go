package runtime

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// A map's node may listen on any port from 1 to 65535, the last included.
func TestRoutingTable_PortRangeIncludes65535(t *testing.T) {
	m := testMap(1, 4, 2)
	m.Nodes[1].Port = 65535
	tbl, err := newRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:65535", tbl.Nodes()[1].Addr)
	m.Nodes[1].Port = 65536
	_, err = newRoutingTable(fromIDL(m))
	assert.ErrorContains(t, err, "port 65536")
}

// routingTable.Nodes lists the nodes by id, whatever their order in the map.
func TestRoutingTable_NodesAreOrderedByID(t *testing.T) {
	m := testMap(1, 8, 4)
	m.Nodes[0], m.Nodes[1], m.Nodes[2], m.Nodes[3] = m.Nodes[2], m.Nodes[3], m.Nodes[1], m.Nodes[0]
	tbl, err := newRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, []nodeAddr{{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}, {4, "127.0.0.1:7004"}}, tbl.Nodes())
}

// Before any map, a key has no segment: the error is a *PartitionError with Segment -1
// (not a segment a map could have) and epoch 0, on a route to NoNode.
func TestCurrentTable_WithoutAMapNoSegment(t *testing.T) {
	var r currentTable
	rt, err := r.Route([]byte("k"))
	require.ErrorIs(t, err, ErrPartitionUnavailable)
	pe, ok := errors.AsType[*PartitionError](err)
	require.True(t, ok, "%T", err)
	assert.Equal(t, int32(-1), pe.Segment)
	assert.Zero(t, pe.Epoch)
	assert.Equal(t, clustermap.NoNode, rt.Node)
}

// A routing table maps a key to its segment's active owner; a segment with no owner is
// ErrPartitionUnavailable, on a route to NoNode.
func TestRoutingTable_RoutesToTheSegmentsOwner(t *testing.T) {
	one, two := int32(1), int32(2)
	table, err := newRoutingTable(&clustermap.Map{
		Epoch:        7,
		SegmentCount: 4,
		Nodes:        []*clustermap.Node{{ID: 1, Host: "10.0.0.1", Port: 7000}, {ID: 2, Host: "10.0.0.2", Port: 7000}},
		Segments: []*clustermap.Segment{
			{ID: 0, Owner: &one}, {ID: 1, Owner: &two}, {ID: 2, Owner: &one}, {ID: 3}, // 3 has no owner
		},
	})
	require.NoError(t, err)
	for _, c := range []struct {
		key     string
		want    clustermap.Route
		unowned bool
	}{
		{"user:0", clustermap.Route{Segment: 0, Node: 1, Addr: "10.0.0.1:7000", Epoch: 7}, false},
		{"user:4", clustermap.Route{Segment: 1, Node: 2, Addr: "10.0.0.2:7000", Epoch: 7}, false},
		{"user:5", clustermap.Route{Segment: 3, Node: clustermap.NoNode, Epoch: 7}, true},
	} {
		r, err := table.Route([]byte(c.key))
		assert.Equal(t, c.want, r, c.key)
		assert.Equal(t, c.unowned, errors.Is(err, ErrPartitionUnavailable), c.key)
	}
}

// A map's dedup window is taken as long as it is a time.Duration: the largest whole number
// of milliseconds one holds, and none for a larger one (it would overflow) or none at all.
func TestRoutingTable_DedupWindowUpToTheLargestDuration(t *testing.T) {
	largest := int64(math.MaxInt64 / int64(time.Millisecond))
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {600000, 10 * time.Minute},
		{largest, time.Duration(largest) * time.Millisecond}, {largest + 1, 0},
	} {
		m := testMap(1, 4, 1)
		m.DedupWindowMs = &tc.ms
		tbl, err := newRoutingTable(fromIDL(m))
		require.NoError(t, err)
		assert.Equal(t, tc.want, tbl.dedupWindow, "%d ms", tc.ms)
	}
}
