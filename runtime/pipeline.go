package runtime

import (
	"context"
	"errors"
	"maps"
	"net"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// pipelines is the pipelined connection mode of an Engine (Config.Pipelining): a
// pipeGroup of a few shared connections per node, and the pool of per-call state.
type pipelines struct {
	conns      int
	timeout    time.Duration // the attempt timeout, also the longest a write may stall
	soloPooled bool          // a call alone in flight to its node takes a pooled connection (not Config.pipelineEveryCall)
	dialSocket func(ctx context.Context, addr string) (net.Conn, error)
	protocol   Protocol
	transport  Transport
	tcfg       *thrift.TConfiguration
	limit      *atomic.Int64            // the map's MaxMessageBytes (Config.requestLimit); nil: none
	newClient  func(thrift.TClient) any // Service.NewClient
	codec      codecWire                // framed binary or compact: an operation's Codec in it encodes and decodes its calls

	calls sync.Pool // of *pcall, each with its own encoder

	groups atomic.Pointer[map[string]*pipeGroup] // by node address; replaced copy-on-write under mu

	mu      sync.Mutex   // serialises group creation, retirement and close
	retired []*pipeGroup // groups of nodes that left the map, closing as their calls end
	closed  bool
}

func newPipelines(cfg Config) *pipelines {
	ps := &pipelines{
		conns:      cfg.PipelineConns,
		timeout:    cfg.AttemptTimeout,
		soloPooled: !cfg.pipelineEveryCall,
		dialSocket: socketDialer(cfg),
		protocol:   cfg.Protocol,
		transport:  cfg.Transport,
		tcfg:       thriftConfig(cfg),
		limit:      cfg.requestLimit,
		newClient:  cfg.Service.NewClient,
		codec:      codecWireOf(cfg.Protocol, cfg.Transport),
	}
	ps.groups.Store(&map[string]*pipeGroup{})
	return ps
}

// invokePipelined is Invoke's attempt over a pipelined connection to the route's node: it
// queues the encoded request, waits for the reply (or the end of the attempt) and records
// the facts on a, as invoke does for a pooled connection. A request still queued when the
// attempt ends was never sent (a.Sent false).
//
// A call that finds no other call to its node in flight in this mode gains nothing from
// sharing a connection, so it takes a pooled connection instead and skips the hand-offs
// between goroutines a pipelined call costs.
func (c *Engine) invokePipelined(ctx context.Context, call *Call, a *Attempt, r clustermap.Route, deadline time.Time, callBound bool) (Response, error) {
	ps := c.pipes
	g, err := ps.group(r.Addr, &c.router)
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	defer g.active.Add(-1)
	if g.active.Add(1) == 1 && ps.soloPooled {
		return c.invokePooled(ctx, call, a, r, deadline, callBound)
	}
	conn, err := g.get(ctx, deadline)
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	w, ok := c.startOwnerWatch(call, r)
	if !ok {
		return nil, c.ownerMovedUnsent(ctx, call, r)
	}
	p := ps.getCall()
	p.conn, p.deadline, p.callBound, p.owner, p.debt = conn, deadline, callBound, w, &call.debt
	var resp Response
	if ps.codec.of(call.Op) != nil {
		resp, err = p.callCodec(ctx, call.Op, ps.codec, call.Request)
	} else {
		resp, err = call.Op.Invoke(ctx, p.kv, call.Request)
	}
	a.Sent = p.wasSent
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	// A connection failed with errOwnsNothing was failed by B6 itself: its node owns nothing.
	o := outcome{err: err, attemptTimeout: p.timedOut, ownerMoved: p.ownerMoved || errors.Is(err, errOwnsNothing)}
	ps.putCall(p)
	if err == nil {
		a.RecordAnswer(call.Op.Status(resp), resp.GetMapEpoch())
		return resp, nil
	}
	return nil, c.callError(ctx, call, r, o)
}

// group returns the group of the node at addr, making it on first use; a node not in the
// current map (it left) has none: errPoolClosed, nothing sent. The map is read under ps.mu,
// so a group is never made for a node whose group an install has retired.
func (ps *pipelines) group(addr string, router *currentTable) (*pipeGroup, error) {
	if g := (*ps.groups.Load())[addr]; g != nil {
		return g, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := *ps.groups.Load()
	if g := m[addr]; g != nil {
		return g, nil
	}
	if table := router.Table(); ps.closed || table == nil || !table.HasAddr(addr) {
		return nil, errPoolClosed
	}
	g := &pipeGroup{ps: ps, addr: addr, slots: make([]pipeSlot, ps.conns)}
	nm := maps.Clone(m)
	nm[addr] = g
	ps.groups.Store(&nm)
	return g, nil
}

// retire closes the groups of nodes not in the newly installed map cur: each connection
// once its calls in flight have ended.
func (ps *pipelines) retire(cur *routingTable) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	retireAbsent(&ps.groups, cur, func(g *pipeGroup) {
		g.close(false)
		ps.retired = append(ps.retired, g)
	})
	ps.retired = slices.DeleteFunc(ps.retired, (*pipeGroup).gone)
}

// close closes every connection, failing the calls in flight on them, and waits for the
// connections' goroutines.
func (ps *pipelines) close() {
	ps.mu.Lock()
	ps.closed = true
	m := *ps.groups.Load()
	ps.groups.Store(&map[string]*pipeGroup{})
	retired := ps.retired
	ps.retired = nil
	ps.mu.Unlock()
	for _, g := range m {
		g.close(true)
	}
	for _, g := range retired {
		g.close(true)
	}
}

// pipeGroup is the pipelined connections of one node.
type pipeGroup struct {
	ps     *pipelines
	addr   string
	slots  []pipeSlot
	closed atomic.Bool
	active atomic.Int32 // calls to the node in this mode, pooled or pipelined
}

// pipeSlot holds one connection of a group; mu is held while a connection is dialed into
// it, and dialed is closed when that dial ends.
type pipeSlot struct {
	mu     sync.Mutex
	conn   atomic.Pointer[pipeConn]
	dialed atomic.Pointer[chan struct{}] // nil while no dial runs
}

// spreadAt is the calls queued or in flight on every open connection of a node at which a
// call opens another (up to Pipelining.Conns): below it, calls share the connections
// already open, whose writes and replies then carry more calls each.
const spreadAt = 8

// get picks the open connection with the fewest calls queued or in flight; it dials a new
// one into a free slot when every open one carries spreadAt calls or more (or none is
// open), and goes on the least busy open one if that dial fails.
func (g *pipeGroup) get(ctx context.Context, deadline time.Time) (*pipeConn, error) {
	for {
		if g.closed.Load() {
			return nil, errPoolClosed
		}
		var best *pipeConn
		full := true
		for i := range g.slots {
			c := g.slots[i].conn.Load()
			if c == nil || c.failed.Load() {
				full = false
				continue
			}
			if best == nil || c.pending.Load() < best.pending.Load() {
				best = c
			}
		}
		if best != nil && (full || best.pending.Load() < spreadAt) {
			return best, nil
		}
		for i := range g.slots {
			s := &g.slots[i]
			if c := s.conn.Load(); c != nil && !c.failed.Load() {
				continue
			}
			if s.mu.TryLock() {
				dialed := make(chan struct{})
				s.dialed.Store(&dialed)
				c, err := g.dialInto(ctx, s, deadline)
				s.dialed.Store(nil)
				close(dialed)
				s.mu.Unlock()
				if err != nil && best != nil && ctx.Err() == nil && !g.closed.Load() {
					return best, nil // busy but open beats none
				}
				return c, err
			}
		}
		if best != nil {
			return best, nil
		}
		// Every free slot is being dialed by another caller: wait for one, then look again.
		if err := g.waitDial(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

// waitDial waits for the end of a dial into a free slot of g, within the caller's context
// and deadline.
func (g *pipeGroup) waitDial(ctx context.Context, deadline time.Time) error {
	for i := range g.slots {
		s := &g.slots[i]
		if c := s.conn.Load(); c != nil && !c.failed.Load() {
			continue
		}
		dialed := s.dialed.Load()
		if dialed == nil {
			goruntime.Gosched() // the dial is starting, or just ended: look again
			break
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-*dialed:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		break
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !time.Now().Before(deadline) {
		return errNoConnInTime
	}
	return nil
}

// dialInto opens a connection in slot s, whose mu the caller holds, unless another caller
// did meanwhile.
func (g *pipeGroup) dialInto(ctx context.Context, s *pipeSlot, deadline time.Time) (*pipeConn, error) {
	if c := s.conn.Load(); c != nil && !c.failed.Load() {
		return c, nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	raw, err := g.ps.dialSocket(dctx, g.addr)
	if err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			err = errNoConnInTime
		}
		return nil, err
	}
	c, err := newPipeConn(raw, g.ps)
	if err != nil {
		raw.Close()
		return nil, err
	}
	s.conn.Store(c)
	if g.closed.Load() {
		// close ran while this dial was in flight and may have missed the slot.
		c.fail(errConnClosed)
		return nil, errPoolClosed
	}
	return c, nil
}

// close stops the group: new calls get errPoolClosed; with force every connection fails
// now (and close waits for its goroutines), else each closes when its last call ends.
func (g *pipeGroup) close(force bool) {
	g.closed.Store(true)
	for i := range g.slots {
		c := g.slots[i].conn.Load()
		if c == nil {
			continue
		}
		if force {
			c.fail(errConnClosed)
			c.wg.Wait()
		} else {
			c.closeIdle()
		}
	}
}

// gone reports whether every connection of a closed group has closed.
func (g *pipeGroup) gone() bool {
	for i := range g.slots {
		if c := g.slots[i].conn.Load(); c != nil && !c.failed.Load() {
			return false
		}
	}
	return true
}
