package runtime

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// testMap returns a map of epoch with count segments spread round-robin over nodes 1..n
// listening at 127.0.0.1:7001.. (or at addrs, when given, node i+1 at addrs[i]).
func testMap(epoch int64, count int32, n int, addrs ...string) *zaris.ClusterMap {
	m := &zaris.ClusterMap{Epoch: epoch, SegmentCount: count}
	for i := 0; i < n; i++ {
		host, port := "127.0.0.1", int32(7001+i)
		if i < len(addrs) {
			h, p, err := splitAddr(addrs[i])
			if err != nil {
				panic(err)
			}
			host, port = h, p
		}
		m.Nodes = append(m.Nodes, &zaris.NodeInfo{ID: int32(i + 1), Host: host, Port: port})
	}
	for s := int32(0); s < count; s++ {
		owner := int32(int(s)%n + 1)
		m.Segments = append(m.Segments, &zaris.SegmentInfo{ID: s, Owner: &owner, Replicas: []int32{owner}})
	}
	return m
}

func splitAddr(addr string) (string, int32, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			p, err := strconv.Atoi(addr[i+1:])
			return addr[:i], int32(p), err
		}
	}
	return "", 0, fmt.Errorf("no port in %q", addr)
}

func TestRoutingTableRoutes(t *testing.T) {
	m := testMap(7, 64, 3)
	tbl, err := newRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, int64(7), tbl.Epoch())
	assert.Equal(t, int32(64), tbl.SegmentCount())
	assert.Equal(t, []nodeAddr{{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}}, tbl.Nodes())
	assert.True(t, tbl.HasAddr("127.0.0.1:7002"))
	assert.False(t, tbl.HasAddr("127.0.0.1:7009"))
	for _, key := range []string{"", "a", "user:42", "123456789"} {
		r, err := tbl.Route([]byte(key))
		require.NoError(t, err)
		seg := clustermap.SegmentOf([]byte(key), 64)
		owner := *m.Segments[seg].Owner
		assert.Equal(t, clustermap.Route{Segment: seg, Node: owner, Addr: "127.0.0.1:" + strconv.Itoa(7000+int(owner)), Epoch: 7}, r, key)
	}

	// The table copied the map: changing the source or a returned copy changes nothing.
	*m.Segments[0].Owner = 3
	got := tbl.Map()
	assert.Equal(t, int32(1), *got.Segments[0].Owner)
	*got.Segments[0].Owner = 2
	got.Nodes[0].Host = "elsewhere"
	assert.Equal(t, int32(1), *tbl.Map().Segments[0].Owner)
	assert.Equal(t, "127.0.0.1", tbl.Map().Nodes[0].Host)
}

func TestRoutingTableNoOwnerIsPartitionUnavailable(t *testing.T) {
	m := testMap(3, 4, 2)
	m.Segments[clustermap.SegmentOf([]byte("k"), 4)].Owner = nil
	tbl, err := newRoutingTable(fromIDL(m))
	require.NoError(t, err)
	r, err := tbl.Route([]byte("k"))
	require.ErrorIs(t, err, ErrPartitionUnavailable)
	var pe *PartitionError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, clustermap.SegmentOf([]byte("k"), 4), pe.Segment)
	assert.Equal(t, int64(3), pe.Epoch)
	assert.Equal(t, clustermap.NoNode, r.Node)
	assert.Equal(t, int64(3), r.Epoch)

	var empty currentTable
	_, err = empty.Route([]byte("k"))
	assert.ErrorIs(t, err, ErrPartitionUnavailable)
}

func TestRoutingTableRejectsBadMaps(t *testing.T) {
	unknown := int32(9)
	for _, tc := range []struct {
		name   string
		mutate func(m *zaris.ClusterMap) *zaris.ClusterMap
		want   string
	}{
		{"nil", func(*zaris.ClusterMap) *zaris.ClusterMap { return nil }, "nil"},
		{"zero segments", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.SegmentCount = 0; return m }, "segmentCount 0"},
		{"negative segments", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.SegmentCount = -4; return m }, "segmentCount -4"},
		{"huge count", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.SegmentCount = 1<<31 - 1; return m }, "4 segments listed"},
		{"missing segment", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Segments = m.Segments[:3]; return m }, "3 segments listed"},
		{"duplicate segment", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Segments[1].ID = 0; return m }, "segment 0 appears twice"},
		{"segment out of range", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Segments[3].ID = 4; return m }, "outside 0..3"},
		{"nil segment", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Segments[2] = nil; return m }, "nil segment"},
		{"unknown owner", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Segments[2].Owner = &unknown; return m }, "unknown node 9"},
		{"duplicate node", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Nodes[1].ID = 1; return m }, "node id 1 appears twice"},
		{"negative node id", func(m *zaris.ClusterMap) *zaris.ClusterMap {
			m.Nodes[1].ID = clustermap.NoNode
			for _, s := range m.Segments {
				if *s.Owner == 2 {
					*s.Owner = clustermap.NoNode
				}
			}
			return m
		}, "node id -1 is negative"},
		{"bad port", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Nodes[0].Port = 0; return m }, "port 0"},
		{"no host", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Nodes[0].Host = ""; return m }, "address"},
		{"nil node", func(m *zaris.ClusterMap) *zaris.ClusterMap { m.Nodes[0] = nil; return m }, "nil node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newRoutingTable(fromIDL(tc.mutate(testMap(1, 4, 2))))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRouterOlderEpochNeverReplacesNewer(t *testing.T) {
	var r currentTable
	assert.Nil(t, r.Table())
	assert.Zero(t, r.Epoch())
	mk := func(epoch int64) *routingTable {
		tbl, err := newRoutingTable(fromIDL(testMap(epoch, 8, 2)))
		require.NoError(t, err)
		return tbl
	}
	t5 := mk(5)
	old, ok := r.Install(t5)
	assert.True(t, ok)
	assert.Nil(t, old)
	_, ok = r.Install(mk(4))
	assert.False(t, ok, "older")
	_, ok = r.Install(mk(5))
	assert.False(t, ok, "equal")
	assert.Same(t, t5, r.Table())
	t6 := mk(6)
	old, ok = r.Install(t6)
	assert.True(t, ok)
	assert.Same(t, t5, old)
	assert.Equal(t, int64(6), r.Epoch())

	// Racing installs of many epochs end on the newest.
	tables := make([]*routingTable, 200)
	for i := range tables {
		tables[i] = mk(int64(i + 7))
	}
	var wg sync.WaitGroup
	for i := len(tables) - 1; i >= 0; i-- {
		wg.Go(func() {
			r.Install(tables[i])
			_, _ = r.Route([]byte("k")) // readers never lock
		})
	}
	wg.Wait()
	assert.Equal(t, int64(206), r.Epoch())
}

func TestRouteDoesNotAllocate(t *testing.T) {
	var r currentTable
	tbl, err := newRoutingTable(fromIDL(testMap(1, 1024, 5)))
	require.NoError(t, err)
	r.Install(tbl)
	key := []byte("user:1234567")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Route(key); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkRoute(b *testing.B) {
	var r currentTable
	tbl, err := newRoutingTable(fromIDL(testMap(1, 1024, 5)))
	require.NoError(b, err)
	r.Install(tbl)
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := r.Route(keys[i&255]); err != nil {
			b.Fatal(err)
		}
	}
}
