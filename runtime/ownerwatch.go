package runtime

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/apache/thrift/lib/go/thrift"
)

// Rule B6, first half: an attempt in flight to a node that a newer map no longer names as
// the owner of its segment ends when that map is installed, however the client learnt it
// (epoch evidence, a refresh). A pipelined call waits on its reply and on the engine's
// mapSignal, closed and replaced on every install; a pooled call blocks on its socket, so
// the install looks through the pooled connections in a call and closes those whose
// segment moved away.

// mapSignal tells waiting attempts that a newer map was installed: the channel wait
// returns is closed on the next install and replaced by a fresh one.
type mapSignal struct {
	ch atomic.Pointer[chan struct{}]
}

func newMapSignal() *mapSignal {
	s := &mapSignal{}
	ch := make(chan struct{})
	s.ch.Store(&ch)
	return s
}

// wait returns the channel the next install closes.
func (s *mapSignal) wait() <-chan struct{} { return *s.ch.Load() }

// notify wakes everyone waiting on the current channel.
func (s *mapSignal) notify() {
	ch := make(chan struct{})
	close(*s.ch.Swap(&ch))
}

// mapInstalled runs after the refresher installs a newer map cur: it retires the pools of
// nodes that left the map, wakes the pipelined calls waiting for replies, and ends the
// pooled calls whose segment's owner changed (B6).
func (c *Engine) mapInstalled(old, cur *RoutingTable) {
	c.retirePools(old, cur)
	c.moved.notify()
	c.endMovedPooled(cur)
	c.endUnownedPipes(cur)
}

// errOwnsNothing fails the pipelined connections to a node that a newer map gives no
// segment, with calls on them: a caller blocked writing to a stalled node (its socket
// buffers full) is not waiting where the install's signal reaches it. Each call on such a
// connection ends as the signal would end it, with ErrOwnerMoved.
var errOwnsNothing = thrift.NewTTransportException(thrift.NOT_OPEN, "zaris: a newer cluster map gives the node no segment")

// endUnownedPipes fails the busy pipelined connections of the nodes cur gives no segment.
func (c *Engine) endUnownedPipes(cur *RoutingTable) {
	if c.pipes == nil {
		return
	}
	for addr, g := range *c.pipes.groups.Load() {
		if slices.Contains(cur.addr, addr) {
			continue
		}
		for i := range g.slots {
			pc := g.slots[i].conn.Load()
			if pc == nil || pc.pending.Load() == 0 {
				continue
			}
			if pc.writeMu.TryLock() { // no write in progress: its callers wait on the signal
				pc.writeMu.Unlock()
				continue
			}
			pc.fail(errOwnsNothing)
		}
	}
}

// ownerGone reports whether the current map no longer names r's node (the node call's
// attempt went to, routed under map epoch r.Epoch) as the owner of call.Key's segment. A
// multi-key sub-request (Call.Target) goes to the owner its items were split for, which
// answers each item from its own map; it ends only when the map gives that node no
// segment at all. It costs one atomic load while the map is the one the attempt was
// routed with.
func (c *Engine) ownerGone(call *Call, r Route) bool {
	t := c.router.Table()
	if t == nil || t.epoch <= r.Epoch {
		return false
	}
	if call.Target != nil {
		return !slices.Contains(t.addr, r.Addr)
	}
	nr, err := t.Route(call.Key)
	return err != nil || nr.Addr != r.Addr
}

// byNode marks a pooled sub-request in flight: it ends when its node owns nothing.
const byNode = int64(1) << 40

// watchMark is what a pooled call in flight is marked with: its segment+1, or byNode.
func watchMark(call *Call, r Route) int64 {
	if call.Target != nil {
		return byNode
	}
	return int64(r.Segment) + 1
}

// ownerMovedError is the error of an attempt ended because the map moved its segment
// away from the node (rule B6). Whether its request may have reached the node is the
// attempt's own record (Attempt.Sent), which B2 reads.
func (c *Engine) ownerMovedError(call *Call, r Route) error {
	return &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Kind: ErrOwnerMoved,
		Err: errOwnerMoved}
}

// errOwnerMoved is the cause recorded for an attempt ended by rule B6.
var errOwnerMoved = ownerMovedCause{}

type ownerMovedCause struct{}

func (ownerMovedCause) Error() string {
	return "a newer cluster map names another owner for the segment"
}

// In a pooled call on a built-in connection, thriftConn.owner holds the call's segment
// plus one while the call is in flight and 0 otherwise; the install that ends the call
// swaps in ownerEnded and closes the connection.
const ownerEnded = -1

// watchOwner marks sc as carrying call's attempt to r's node for r's segment, and reports
// false (unmarking it) if the map already moved that segment away: the call is then not
// sent. An install after the mark finds the connection (endMovedPooled).
func (c *Engine) watchOwner(sc *thriftConn, call *Call, r Route) bool {
	seg := watchMark(call, r)
	sc.owner.Store(seg)
	if c.ownerGone(call, r) {
		sc.owner.CompareAndSwap(seg, 0)
		return false
	}
	return true
}

// watchCustom is watchOwner for a connection of a custom Dialer, marked in p.calls.
func (c *Engine) watchCustom(p *pool, conn Conn, call *Call, r Route) bool {
	p.calls.Store(conn, watchMark(call, r))
	if c.ownerGone(call, r) {
		p.calls.Delete(conn)
		return false
	}
	return true
}

// unwatchOwner ends the mark of watchOwner and reports whether an install ended the call
// (the connection is then closed).
func unwatchOwner(sc *thriftConn) (ended bool) {
	return sc.owner.Swap(0) == ownerEnded
}

// endMovedPooled closes every pooled connection in a call whose segment cur gives to
// another node.
func (c *Engine) endMovedPooled(cur *RoutingTable) {
	c.poolMu.Lock()
	pools := make([]*pool, 0, len(*c.pools.Load())+len(c.retired))
	for _, p := range *c.pools.Load() {
		pools = append(pools, p)
	}
	pools = append(pools, c.retired...)
	c.poolMu.Unlock()
	moved := func(p *pool, seg int64) bool {
		if seg == byNode {
			return !slices.Contains(cur.addr, p.addr)
		}
		s := seg - 1
		return s >= int64(cur.count) || cur.addr[s] != p.addr
	}
	for _, p := range pools {
		p.calls.Range(func(k, v any) bool {
			if seg := v.(int64); seg > 0 && moved(p, seg) && p.calls.CompareAndSwap(k, v, int64(ownerEnded)) {
				k.(Conn).Close()
			}
			return true
		})
		p.mu.Lock()
		for conn := range p.open {
			sc, ok := conn.(*thriftConn)
			if !ok {
				continue
			}
			seg := sc.owner.Load()
			if seg <= 0 || !moved(p, seg) {
				continue
			}
			if sc.owner.CompareAndSwap(seg, ownerEnded) {
				sc.Close()
			}
		}
		p.mu.Unlock()
	}
}

// ownerWait is what a pipelined call needs to notice rule B6 while it waits: the engine,
// the call and its route, and the signal channel loaded before the route was checked.
type ownerWait struct {
	c    *Engine
	call *Call
	r    Route
	ch   <-chan struct{}
}

// next is called when w.ch closed: it returns the channel to wait on next, or nil if the
// map moved the call's segment away from its node.
func (w *ownerWait) next() <-chan struct{} {
	ch := w.c.moved.wait() // before the check, so an install after it closes ch
	if w.c.ownerGone(w.call, w.r) {
		return nil
	}
	return ch
}

// startOwnerWait loads the signal and checks the route, in that order; it reports false
// when the owner already moved (the call is then not sent).
func (c *Engine) startOwnerWait(call *Call, r Route) (ownerWait, bool) {
	w := ownerWait{c: c, call: call, r: r, ch: c.moved.wait()}
	return w, !c.ownerGone(call, r)
}

// ownerMovedUnsent is the error of an attempt that found, before sending, that its
// segment's owner had changed since it was routed: not sent, retried at once.
func (c *Engine) ownerMovedUnsent(ctx context.Context, call *Call, r Route) error {
	if ctx.Err() != nil {
		return c.noConnError(ctx, call, r, ctx.Err())
	}
	return c.ownerMovedError(call, r)
}
