package runtime

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// routingTable is an immutable routing table built from one cluster map: for each segment,
// its active owner's node id and address. Build one with newRoutingTable; it is never
// changed afterwards, so any number of goroutines may read it without locks.
type routingTable struct {
	epoch int64
	count int32
	owner []int32  // per segment: the active owner's id, or NoNode
	addr  []string // per segment: the active owner's host:port, or ""
	nodes []nodeAddr
	src   *clustermap.Map // a private deep copy of the map
	// maxRequest is the map's MaxMessageBytes, or 0 when it says none.
	maxRequest int64
	// dedupWindow is the map's DedupWindowMs, or 0 when it says none (rule B8).
	dedupWindow time.Duration
}

// nodeAddr is one node of a map: its id and host:port.
type nodeAddr struct {
	// ID is the node's id.
	ID int32
	// Addr is the node's host:port.
	Addr string
}

// newRoutingTable validates m and builds its routing table. It rejects a map whose
// segmentCount is not positive, whose segments do not cover 0..segmentCount-1 exactly once,
// whose nodes have duplicate ids or bad addresses, or whose owners name unknown nodes. A
// segment without an owner is valid: routing a key to it is ErrPartitionUnavailable. The
// table keeps a copy of m, so the caller may reuse m.
func newRoutingTable(m *clustermap.Map) (*routingTable, error) {
	if m == nil {
		return nil, fmt.Errorf("zaris: invalid cluster map: nil")
	}
	if m.SegmentCount <= 0 {
		return nil, invalidMap(m, "segmentCount %d is not positive", m.SegmentCount)
	}
	// Checked before allocating per segment, so a map claiming a huge count costs nothing.
	if n := len(m.Segments); n != int(m.SegmentCount) {
		return nil, invalidMap(m, "%d segments listed for segmentCount %d", n, m.SegmentCount)
	}
	t := blankTable(m)
	byID, err := t.addNodes(m)
	if err != nil {
		return nil, err
	}
	if err := t.addOwners(m, byID); err != nil {
		return nil, err
	}
	return t, nil
}

// invalidMap is the error of newRoutingTable refusing m, for the reason format and args say.
func invalidMap(m *clustermap.Map, format string, args ...any) error {
	return fmt.Errorf("zaris: invalid cluster map (epoch %d): %s", m.Epoch, fmt.Sprintf(format, args...))
}

// blankTable is the table of m before its nodes and owners are added: its epoch, its
// segment count, its limits and a copy of m.
func blankTable(m *clustermap.Map) *routingTable {
	t := &routingTable{
		epoch: m.Epoch,
		count: m.SegmentCount,
		owner: make([]int32, m.SegmentCount),
		addr:  make([]string, m.SegmentCount),
		src:   m.Clone(),
	}
	if m.MaxMessageBytes > 0 {
		t.maxRequest = m.MaxMessageBytes
	}
	if m.DedupWindowMs > 0 && m.DedupWindowMs <= math.MaxInt64/int64(time.Millisecond) {
		t.dedupWindow = time.Duration(m.DedupWindowMs) * time.Millisecond
	}
	return t
}

// addNodes checks m's nodes (none nil, ids unique and not negative, so none is
// clustermap.NoNode, each address a host and a port of 1..65535), adds them to t ordered by
// id, and returns their host:port addresses by id.
func (t *routingTable) addNodes(m *clustermap.Map) (map[int32]string, error) {
	byID := make(map[int32]string, len(m.Nodes))
	for _, n := range m.Nodes {
		if n == nil {
			return nil, invalidMap(m, "nil node")
		}
		if n.ID < 0 {
			return nil, invalidMap(m, "node id %d is negative", n.ID)
		}
		if _, dup := byID[n.ID]; dup {
			return nil, invalidMap(m, "node id %d appears twice", n.ID)
		}
		if n.Host == "" || n.Port <= 0 || n.Port > 65535 {
			return nil, invalidMap(m, "node %d has address %q port %d", n.ID, n.Host, n.Port)
		}
		addr := net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
		byID[n.ID] = addr
		t.nodes = append(t.nodes, nodeAddr{ID: n.ID, Addr: addr})
	}
	slices.SortFunc(t.nodes, func(a, b nodeAddr) int { return int(a.ID) - int(b.ID) })
	return byID, nil
}

// addOwners checks m's segments (none nil, each id in range and listed once, each owner a
// node of byID) and records each one's owner and its address in t, or NoNode for none.
func (t *routingTable) addOwners(m *clustermap.Map, byID map[int32]string) error {
	seen := make([]bool, m.SegmentCount)
	for _, s := range m.Segments {
		if s == nil {
			return invalidMap(m, "nil segment")
		}
		if s.ID < 0 || s.ID >= m.SegmentCount {
			return invalidMap(m, "segment id %d outside 0..%d", s.ID, m.SegmentCount-1)
		}
		if seen[s.ID] {
			return invalidMap(m, "segment %d appears twice", s.ID)
		}
		seen[s.ID] = true
		t.owner[s.ID] = clustermap.NoNode
		if s.Owner != nil {
			addr, ok := byID[*s.Owner]
			if !ok {
				return invalidMap(m, "segment %d is owned by unknown node %d", s.ID, *s.Owner)
			}
			t.owner[s.ID], t.addr[s.ID] = *s.Owner, addr
		}
	}
	return nil
}

// Epoch returns the map's epoch.
func (t *routingTable) Epoch() int64 { return t.epoch }

// SegmentCount returns the map's segment count.
func (t *routingTable) SegmentCount() int32 { return t.count }

// Route returns where key goes: its segment's active owner. It does not allocate. A segment
// with no owner is an error wrapping ErrPartitionUnavailable (the Route still carries the
// segment and epoch).
func (t *routingTable) Route(key []byte) (clustermap.Route, error) {
	seg := clustermap.SegmentOf(key, t.count)
	r := clustermap.Route{Segment: seg, Node: t.owner[seg], Addr: t.addr[seg], Epoch: t.epoch}
	if r.Node == clustermap.NoNode {
		return r, &PartitionError{Segment: seg, Epoch: t.epoch}
	}
	return r, nil
}

// Nodes returns the map's nodes, ordered by id. The slice is shared: do not modify it.
func (t *routingTable) Nodes() []nodeAddr { return t.nodes }

// HasAddr reports whether a node of the map listens at addr.
func (t *routingTable) HasAddr(addr string) bool {
	for _, n := range t.nodes {
		if n.Addr == addr {
			return true
		}
	}
	return false
}

// Map returns a deep copy of the cluster map the table was built from.
func (t *routingTable) Map() *clustermap.Map { return t.src.Clone() }

// PartitionError is the error of routing a key whose segment has no active owner in the
// client's map. It matches ErrPartitionUnavailable with errors.Is.
type PartitionError struct {
	// Segment is the key's segment.
	Segment int32
	// Epoch is the epoch of the map that has no owner for it.
	Epoch int64
}

// Error names the segment and the epoch.
func (e *PartitionError) Error() string {
	return fmt.Sprintf("%v: segment %d has no owner in map epoch %d", ErrPartitionUnavailable, e.Segment, e.Epoch)
}

// Unwrap returns ErrPartitionUnavailable.
func (e *PartitionError) Unwrap() error { return ErrPartitionUnavailable }

// currentTable holds the client's current routing table. Readers load it with one atomic load
// and never lock; Install swaps in a table only if its epoch is newer, so an older map
// (a slow fetch, a lagging node) never replaces a newer one. The zero value holds no map.
// A currentTable is safe for concurrent use.
type currentTable struct {
	cur atomic.Pointer[routingTable]
	// maxRequest is the current map's MaxMessageBytes (0: none), which the client's
	// connections read for every request they encode.
	maxRequest atomic.Int64
}

// Table returns the current routing table, or nil before the first Install.
func (r *currentTable) Table() *routingTable { return r.cur.Load() }

// Epoch returns the current map's epoch, or 0 before the first Install.
func (r *currentTable) Epoch() int64 {
	if t := r.cur.Load(); t != nil {
		return t.epoch
	}
	return 0
}

// Route routes key with the current table. Without one it returns an error wrapping
// ErrPartitionUnavailable.
func (r *currentTable) Route(key []byte) (clustermap.Route, error) {
	t := r.cur.Load()
	if t == nil {
		return clustermap.Route{Node: clustermap.NoNode}, &PartitionError{Segment: -1}
	}
	return t.Route(key)
}

// Install makes t the current table if there is none or t's epoch is newer than the
// current one's, and reports whether it did; it returns the table it replaced.
func (r *currentTable) Install(t *routingTable) (old *routingTable, installed bool) {
	for {
		cur := r.cur.Load()
		if cur != nil && t.epoch <= cur.epoch {
			return cur, false
		}
		if r.cur.CompareAndSwap(cur, t) {
			r.maxRequest.Store(r.cur.Load().maxRequest) // the newest's, whoever stores last
			return cur, true
		}
	}
}

// Route returns where key goes under the map the refresher keeps current; the batch layer
// splits a batch's items by owner with it.
func (r *Refresher) Route(key []byte) (clustermap.Route, error) { return r.router.Route(key) }

// routeCall is where call's attempt goes: its Target when set (a sub-request goes to the
// owner its items were split for, even if the map changed since: that node then answers
// each item from its own map), else Key's owner under the current map.
func (c *Engine) routeCall(call *Call) (clustermap.Route, error) {
	if call.Target != nil {
		return *call.Target, nil
	}
	return c.router.Route(call.Key)
}

// Route returns where key goes under the current map: its segment's active owner. It does
// not allocate. A segment with no owner is an error wrapping ErrPartitionUnavailable (the
// Route still carries the segment and epoch); before any map, the segment is -1.
func (c *Engine) Route(key []byte) (clustermap.Route, error) { return c.router.Route(key) }
