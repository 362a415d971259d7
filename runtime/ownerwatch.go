package runtime

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Rule B6, first half: an attempt in flight to a node that a newer map no longer names as
// the owner of its segment ends when that map is installed, however the client learnt it
// (epoch evidence, a refresh). Each attempt's connection records what it watches (a
// watchState): the install looks through the connections, pipelined and pooled, and ends
// the calls whose segment moved away. A call checks the map once more after its record is
// in place, so an install either finds the record or is seen by the call.

// mapInstalled runs after the refresher installs a newer map cur: it ends the pipelined
// calls whose segment's owner changed (before the groups of nodes that left the map are
// retired), retires the pools of those nodes, and ends the pooled calls whose segment's
// owner changed (B6).
func (c *Engine) mapInstalled(old, cur *routingTable) {
	if c.pipes != nil {
		c.pipes.endMoved(cur)
	}
	c.retirePools(old, cur)
	c.endMovedPooled(cur)
	c.endUnownedPipes(cur)
}

// errOwnsNothing fails the pipelined connections to a node that a newer map gives no
// segment, with calls on them: a caller blocked writing to a stalled node (its socket
// buffers full) is not waiting where the install's telling reaches it. Each call on such a
// connection ends as the install would end it, with ErrOwnerMoved.
var errOwnsNothing = thrift.NewTTransportException(thrift.NOT_OPEN, "zaris: a newer cluster map gives the node no segment")

// endUnownedPipes fails the busy pipelined connections of the nodes cur gives no segment,
// in the map or gone from it (their groups retired).
func (c *Engine) endUnownedPipes(cur *routingTable) {
	if c.pipes == nil {
		return
	}
	for _, g := range c.pipes.allGroups() {
		if slices.Contains(cur.addr, g.addr) {
			continue
		}
		for i := range g.slots {
			pc := g.slots[i].conn.Load()
			if pc == nil || pc.pending.Load() == 0 {
				continue
			}
			if pc.writeMu.TryLock() { // no write in progress: its callers wait to be told
				pc.writeMu.Unlock()
				continue
			}
			pc.fail(errOwnsNothing)
		}
	}
}

// ownerGone reports whether the current map moves the attempt that watches s, routed to r
// under map epoch r.Epoch, away from r's node (watchState.movedBy). It costs one atomic
// load while the map is the one the attempt was routed with.
func (c *Engine) ownerGone(s watchState, r clustermap.Route) bool {
	t := c.router.Table()
	return t != nil && t.epoch > r.Epoch && s.movedBy(t, r.Addr)
}

// inFlight is rule B6's record of one pooled connection (pooledConn), whatever dialed it:
// idle, or carrying a call that a newer map ends by moving it away from the connection's
// node, or carrying one that an install ended (and closed the connection). It is one
// atomic word, so the call and an install race on it without a lock; the zero value is idle.
type inFlight struct{ state atomic.Uint64 }

// watchState is what an inFlight holds: its kind and, for watchSegment, the segment.
type watchState uint64

// watchKind names the states of an inFlight.
type watchKind uint32

const (
	// watchIdle: no call in flight. The zero watchState.
	watchIdle watchKind = iota
	// watchSegment: a call in flight, which a newer map ends when it names another owner
	// for the call's segment (or has fewer segments).
	watchSegment
	// watchNode: a multi-key sub-request in flight, which a newer map ends when it gives
	// the node no segment at all.
	watchNode
	// watchEnded: an install ended the call in flight and closed the connection.
	watchEnded
)

// The states of kinds that carry no segment.
const (
	stateIdle  = watchState(watchIdle) << 32
	stateEnded = watchState(watchEnded) << 32
)

// watching returns the state of a connection carrying kind k's call on segment seg.
func watching(k watchKind, seg int32) watchState {
	return watchState(uint64(k)<<32 | uint64(uint32(seg)))
}

// kind is s's kind.
func (s watchState) kind() watchKind { return watchKind(s >> 32) }

// segment is the segment of a watchSegment state.
func (s watchState) segment() int32 { return int32(uint32(s)) }

// watchFor is the state of a connection carrying call's attempt, routed to r. A multi-key
// sub-request (Call.Target) goes to the owner its items were split for, which answers each
// item from its own map: it is watched for the node owning no segment at all.
func watchFor(call *Call, r clustermap.Route) watchState {
	if call.Target != nil {
		return watching(watchNode, 0) // no segment: any of the node's
	}
	return watching(watchSegment, r.Segment)
}

// movedBy reports whether cur, a newer map, ends the call s watches on a connection to the
// node at addr.
func (s watchState) movedBy(cur *routingTable, addr string) bool {
	switch s.kind() {
	case watchNode:
		return !slices.Contains(cur.addr, addr)
	case watchSegment:
		seg := s.segment()
		return seg >= cur.count || cur.addr[seg] != addr
	}
	return false
}

// start records a call in flight, in state s.
func (f *inFlight) start(s watchState) { f.state.Store(uint64(s)) }

// finish records the end of the call in flight and reports whether an install ended it
// first (the connection is then closed).
func (f *inFlight) finish() (ended bool) {
	return watchState(f.state.Swap(uint64(stateIdle))) == stateEnded
}

// endIfMoved ends the call in flight, if any, when cur moves it away from the node at addr
// (watchState.movedBy), and reports whether it did: the caller then closes the connection.
func (f *inFlight) endIfMoved(cur *routingTable, addr string) bool {
	s := watchState(f.state.Load())
	return s.movedBy(cur, addr) && f.state.CompareAndSwap(uint64(s), uint64(stateEnded))
}

// ownerMovedError is the error of an attempt ended because the map moved its segment
// away from the node (rule B6). Whether its request may have reached the node is the
// attempt's own record (Attempt.Sent), which B2 reads.
func (c *Engine) ownerMovedError(call *Call, r clustermap.Route) error {
	return &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Kind: ErrOwnerMoved,
		Err: errOwnerMoved}
}

// errOwnerMoved is the cause recorded for an attempt ended by rule B6.
var errOwnerMoved = ownerMovedCause{}

type ownerMovedCause struct{}

func (ownerMovedCause) Error() string {
	return "a newer cluster map names another owner for the segment"
}

// watchOwner marks pc as carrying call's attempt, routed to r, and reports false (ending
// the mark) if the map already moved the call away from r's node: the call is then not
// sent, and ended reports that an install closed the connection meanwhile. An install
// after the mark finds the connection (endMovedPooled).
func (c *Engine) watchOwner(pc *pooledConn, call *Call, r clustermap.Route) (ok, ended bool) {
	s := watchFor(call, r)
	pc.inFlight.start(s)
	if c.ownerGone(s, r) {
		return false, pc.inFlight.finish()
	}
	return true, false
}

// endMovedPooled closes every pooled connection whose call in flight cur moves away from
// its node. The connections are closed outside the pools' locks: a custom Dialer's Close
// may take its time.
func (c *Engine) endMovedPooled(cur *routingTable) {
	c.poolMu.Lock()
	pools := make([]*pool, 0, len(*c.pools.Load())+len(c.retired))
	for _, p := range *c.pools.Load() {
		pools = append(pools, p)
	}
	pools = append(pools, c.retired...)
	c.poolMu.Unlock()
	var ended []Conn
	for _, p := range pools {
		p.mu.Lock()
		for pc := range p.open {
			if pc.inFlight.endIfMoved(cur, p.addr) {
				ended = append(ended, pc)
			}
		}
		p.mu.Unlock()
	}
	for _, conn := range ended {
		conn.Close()
	}
}

// ownerWatch is what a pipelined call needs for rule B6: what it watches, its route, and
// the engine whose map it checks. It is set before the call is queued. The install reads s
// of the calls a connection's lists hold (pipeConn.endMoved), which are not reused while
// held; the call whose reply is being read it judges by the reader's copy of s
// (pipeConn.readingWatch), since that call may be delivered and reused meanwhile.
type ownerWatch struct {
	c *Engine
	s watchState
	r clustermap.Route
}

// gone reports whether the current map moves the call away from its node; a call with no
// engine (the zero ownerWatch) watches nothing.
func (w *ownerWatch) gone() bool { return w.c != nil && w.c.ownerGone(w.s, w.r) }

// startOwnerWatch returns call's watch, routed to r, and reports false when the owner
// already moved (the call is then not sent).
func (c *Engine) startOwnerWatch(call *Call, r clustermap.Route) (ownerWatch, bool) {
	w := ownerWatch{c: c, s: watchFor(call, r), r: r}
	return w, !w.gone()
}

// ownerMovedUnsent is the error of an attempt that found, before sending, that its
// segment's owner had changed since it was routed: not sent, retried at once.
func (c *Engine) ownerMovedUnsent(ctx context.Context, call *Call, r clustermap.Route) error {
	if ctx.Err() != nil {
		return c.noConnError(ctx, call, r, ctx.Err())
	}
	return c.ownerMovedError(call, r)
}

// endMoved ends the pipelined calls that cur, a newer map, moves away from their node
// (pipeConn.endMoved), on the groups of the nodes in the map and on the retired ones, whose
// connections close only once their calls end. The install runs it before it retires the
// groups of nodes that left the map; a call that gets a group after that finds cur when it
// checks the map again.
func (ps *pipelines) endMoved(cur *routingTable) {
	for _, g := range ps.allGroups() {
		for i := range g.slots {
			if pc := g.slots[i].conn.Load(); pc != nil && pc.pending.Load() > 0 {
				pc.endMoved(cur, g.addr)
			}
		}
	}
}

// allGroups returns the groups of the nodes in the map and the retired ones.
func (ps *pipelines) allGroups() []*pipeGroup {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append(slices.Collect(maps.Values(*ps.groups.Load())), ps.retired...)
}

// endMoved ends, as the sweep ends an attempt at its deadline, the attempt of every call on
// the connection (to the node at addr) that cur moves away (rule B6), with errOwnerMoved:
// one still queued is dropped unwritten; one taken by a flush, written, or whose reply is
// being read is in doubt, and its reply, if it comes, is read and dropped. For those the
// connection's silence is watched from their write, as the sweep watches it: a node that
// answers nothing for an attempt timeout fails the connection, which its callers have left.
// The sweep that watches it runs already: a call ends here only while its caller waits on
// the connection, and a caller waiting keeps the sweep running (pipeConn.sweep).
func (c *pipeConn) endMoved(cur *routingTable, addr string) {
	moved := func(p *pcall) bool { return p.owner.s.movedBy(cur, addr) }
	ended := func(p *pcall, from int32) {
		if p.endAttempt(from, stSwept, true, errOwnerMoved) {
			c.watchQuiet(p)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.queue {
		if moved(p) {
			p.endAttempt(stQueued, stExpired, false, errOwnerMoved) // the flush that takes it counts it out
		}
	}
	for _, p := range c.taken {
		if moved(p) && !p.endAttempt(stQueued, stExpired, false, errOwnerMoved) {
			ended(p, stWritten)
		}
	}
	for _, p := range c.inflight[c.head:] {
		if moved(p) {
			ended(p, stWritten)
		}
	}
	// The reader claims a call under mu, and copies its watch: a call reading still holds
	// was claimed with readingWatch. Once the reader delivers it, the call may be reused,
	// so only the copy is read.
	if p := c.reading.Load(); p != nil && c.readingWatch.movedBy(cur, addr) && c.reading.CompareAndSwap(p, nil) {
		ended(p, stReading)
	}
}
