package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A map's node may listen on any port from 1 to 65535, the last included.
func TestRoutingTable_PortRangeIncludes65535(t *testing.T) {
	m := testMap(1, 4, 2)
	m.Nodes[1].Port = 65535
	tbl, err := NewRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:65535", tbl.Nodes()[1].Addr)
	m.Nodes[1].Port = 65536
	_, err = NewRoutingTable(fromIDL(m))
	assert.ErrorContains(t, err, "port 65536")
}

// RoutingTable.Nodes lists the nodes by id, whatever their order in the map.
func TestRoutingTable_NodesAreOrderedByID(t *testing.T) {
	m := testMap(1, 8, 4)
	m.Nodes[0], m.Nodes[1], m.Nodes[2], m.Nodes[3] = m.Nodes[2], m.Nodes[3], m.Nodes[1], m.Nodes[0]
	tbl, err := NewRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, []NodeAddr{{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}, {4, "127.0.0.1:7004"}}, tbl.Nodes())
}
