package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
)

// Cluster is the client engine: the configuration, the current cluster map and its
// routing table, a connection pool per node, and the shared map refresher. Its Invoke is
// the terminal handler of the middleware stack: it sends one attempt to the key's owner
// and records what happened. A Cluster is safe for concurrent use.
type Cluster struct {
	cfg       Config
	dial      Dialer
	clock     Clock
	router    Router
	refresher *Refresher
	closed    atomic.Bool

	pools atomic.Pointer[map[string]*pool] // by node address; replaced copy-on-write under poolMu

	poolMu  sync.Mutex // serialises pool creation, retirement and Close
	retired []*pool    // pools of nodes that left the map, still lending connections

	pipes *pipelines // the pipelined connections (pipeline.go); nil in pooled mode
}

// Dial builds a Config from opts (see NewConfig), fetches the first cluster map from the
// seeds in order (the first that answers with a valid map wins) and returns the engine.
// If no seed answers, the error wraps ErrNoSeeds and each seed's error. ctx bounds the
// bootstrap only.
func Dial(ctx context.Context, opts ...Option) (*Cluster, error) {
	cfg, err := NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, dial: cfg.Dialer, clock: cfg.Clock}
	if c.dial == nil {
		c.dial = DefaultDialer(cfg)
	}
	c.pools.Store(&map[string]*pool{})
	if cfg.Pipeline.Enabled && cfg.Dialer == nil {
		c.pipes = newPipelines(cfg)
	}
	c.refresher = NewRefresher(cfg, &c.router, c.fetchMap)
	c.refresher.onInstall = c.retirePools

	var errs []error
	for _, seed := range cfg.Seeds {
		m, err := c.fetchFrom(ctx, seed)
		if err == nil {
			var t *RoutingTable
			if t, err = NewRoutingTable(m); err == nil {
				// The bootstrap is not a refresh: it opens no debounce window (R6), so a
				// client whose first calls meet a stale map (started just after a node
				// died) refreshes at once instead of retrying into the dead node.
				c.router.Install(t)
				return c, nil
			}
		}
		errs = append(errs, fmt.Errorf("seed %s: %w", seed, err))
		if ctx.Err() != nil {
			break
		}
	}
	c.refresher.Close()
	return nil, fmt.Errorf("%w: %w", ErrNoSeeds, errors.Join(errs...))
}

// Config returns the client's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// Refresher returns the client's shared map refresher, which the refresh middleware asks
// for refreshes (rules R2, R3, R6, B1).
func (c *Cluster) Refresher() *Refresher { return c.refresher }

// Map returns a copy of the current cluster map.
func (c *Cluster) Map() *zaris.ClusterMap { return c.router.Table().Map() }

// Route returns where key goes under the current map (see RoutingTable.Route).
func (c *Cluster) Route(key []byte) (Route, error) { return c.router.Route(key) }

// Close closes every connection (failing the calls in flight on them), stops the
// refresher and waits for its fetch, so nothing of the client is left running. After
// Close, Invoke returns ErrClosed. Close is idempotent and always returns nil.
func (c *Cluster) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.refresher.Close()
	if c.pipes != nil {
		c.pipes.close()
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	for _, p := range *c.pools.Load() {
		p.close(true)
	}
	for _, p := range c.retired {
		p.close(true)
	}
	c.retired = nil
	c.pools.Store(&map[string]*pool{})
	return nil
}

// Invoke sends one attempt of call: it routes call.Key with the current map, borrows a
// connection to the owner, and runs call.Op.Invoke on it within the attempt timeout. It
// records the facts on call.Current() (node, address, map epoch, whether the request may
// have been sent, the status and the answering node's epoch, the error, the duration) and
// leaves judging them to the classify layer. A response is returned with a nil error
// whatever its status. The errors:
//
//   - no owner for the segment: a *PartitionError (ErrPartitionUnavailable), not sent;
//   - no connection (dial failed, node left the map, none free within the attempt
//     timeout): a *NodeError with ErrNodeUnavailable, not sent;
//   - the attempt timeout fired: ErrAttemptTimeout, sent;
//   - a Thrift transport or protocol failure: ErrTransport and the cause, sent;
//   - anything else (the caller's context ended, an application exception): a *NodeError
//     wrapping it without a kind, so errors.Is(err, context.Canceled) still works;
//   - the Cluster is closed: ErrClosed.
//
// Any error closes the connection. Invoke does not refresh the map itself: the refresh
// layer above it decides when (rules R2, R3, B1) and asks Refresher.
func (c *Cluster) Invoke(ctx context.Context, call *Call) (Response, error) {
	a := call.Current()
	start := c.clock.Now()
	resp, err := c.invoke(ctx, call, a)
	a.Duration = c.clock.Now().Sub(start)
	a.Err = err
	return resp, err
}

func (c *Cluster) invoke(ctx context.Context, call *Call, a *Attempt) (Response, error) {
	a.Sent = false
	if c.closed.Load() {
		return nil, ErrClosed
	}
	r, err := c.router.Route(call.Key)
	a.Node, a.Addr, a.MapEpoch = r.Node, r.Addr, r.Epoch
	if err != nil {
		return nil, err
	}
	deadline, callBound := c.attemptDeadline(call)
	if c.pipes != nil {
		return c.invokePipelined(ctx, call, a, r, deadline, callBound)
	}
	return c.invokePooled(ctx, call, a, r, deadline, callBound)
}

// invokePooled sends the attempt over a connection borrowed from the node's pool.
func (c *Cluster) invokePooled(ctx context.Context, call *Call, a *Attempt, r Route, deadline time.Time, callBound bool) (Response, error) {
	p := c.poolFor(r.Addr)
	conn, err := c.borrow(ctx, p, deadline)
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	a.Sent = true
	var (
		resp Response
		o    outcome
	)
	if sc, ok := conn.(*thriftConn); ok {
		resp, o = callSocket(ctx, sc, call, deadline, callBound)
	} else {
		resp, o = callConn(ctx, conn, call, deadline, callBound)
	}
	if o.err == nil {
		if o.spent {
			p.discard(conn)
		} else {
			p.put(conn)
		}
		a.Answered, a.Status, a.AnswerEpoch = true, resp.GetStatus(), resp.GetMapEpoch()
		return resp, nil
	}
	p.discard(conn)
	return nil, c.callError(ctx, call, r, o)
}

// outcome is how one call over a connection ended.
type outcome struct {
	err            error
	attemptTimeout bool // the attempt timeout fired while the caller's context was live
	spent          bool // the connection's deadline was spent aborting the call: do not reuse it
}

// errNoConnInTime is the cause of an attempt that found no free connection in time.
var errNoConnInTime = errors.New("no free connection within the attempt timeout")

// attemptDeadline is when the attempt must end: the attempt timeout from now, or the call's
// deadline (call.Deadline, set by the deadline layer) if that comes first, in which case
// callBound is true. It covers waiting for a connection and the call, and it is a socket
// deadline, so it is wall-clock time whatever the Clock: the call's deadline is carried
// over as the time left until it on the Clock.
func (c *Cluster) attemptDeadline(call *Call) (deadline time.Time, callBound bool) {
	now := time.Now()
	deadline = now.Add(c.cfg.AttemptTimeout)
	if !call.Deadline.IsZero() {
		if d := now.Add(call.Deadline.Sub(c.clock.Now())); d.Before(deadline) {
			return d, true
		}
	}
	return deadline, false
}

// borrow gets a connection from p, an idle one at once if it can, else waiting or dialing
// until deadline; a nil p (the node is not in the map) has none.
func (c *Cluster) borrow(ctx context.Context, p *pool, deadline time.Time) (Conn, error) {
	if p == nil {
		return nil, errPoolClosed
	}
	if conn, ok := p.tryIdle(); ok {
		return conn, nil
	}
	bctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := p.get(bctx)
	if err != nil && bctx.Err() != nil && ctx.Err() == nil {
		err = errNoConnInTime
	}
	return conn, err
}

// callConn runs call over a Conn of a custom Dialer, within deadline through its context.
func callConn(ctx context.Context, conn Conn, call *Call, deadline time.Time, callBound bool) (Response, outcome) {
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	resp, err := call.Op.Invoke(actx, conn.Client(), call.Request)
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	o := outcome{err: err}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		if callBound {
			o.err = context.DeadlineExceeded // the call's deadline, not the attempt timeout
		} else {
			o.attemptTimeout = true
		}
	}
	return resp, o
}

// callSocket runs call over a built-in connection. The deadline (or the caller's, if
// earlier; callerDeadline says the deadline given is already the call's) goes on the socket, and the caller's cancel aborts the socket through
// context.AfterFunc: no timer or context is made per call. The generated code gets a
// context without a deadline, because the Thrift protocols retry a timed-out read while
// their context has a deadline that has not passed.
func callSocket(ctx context.Context, sc *thriftConn, call *Call, deadline time.Time, callerDeadline bool) (Response, outcome) {
	octx := ctx
	if cdl, ok := ctx.Deadline(); ok {
		// The connection carries one call at a time, so its wrapper is reused.
		sc.noDeadline.Context = ctx
		octx = &sc.noDeadline
		if !cdl.After(deadline) {
			deadline, callerDeadline = cdl, true
		}
	}
	stop := sc.arm(ctx, deadline)
	resp, err := call.Op.Invoke(octx, sc.client, call.Request)
	sc.noDeadline.Context = nil
	o := outcome{spent: !stop()}
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	if err != nil && ctx.Err() == nil && !o.spent && !time.Now().Before(deadline) {
		if callerDeadline {
			err = context.DeadlineExceeded // the caller's deadline, reached on the socket first
		} else {
			o.attemptTimeout = true
		}
	}
	o.err = err
	return resp, o
}

// withoutDeadline is a context that hides its parent's deadline but keeps its
// cancellation and values.
type withoutDeadline struct{ context.Context }

func (withoutDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// noConnError describes a failure to get a connection: nothing was sent.
func (c *Cluster) noConnError(ctx context.Context, call *Call, r Route, err error) error {
	e := &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Err: err}
	switch {
	case c.closed.Load():
		e.Kind = ErrClosed
	case ctx.Err() != nil:
		e.Err = ctx.Err()
	default:
		e.Kind = ErrNodeUnavailable
	}
	return e
}

// callError describes a call that was sent and got no response.
func (c *Cluster) callError(ctx context.Context, call *Call, r Route, o outcome) error {
	err := o.err
	e := &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Err: err}
	var (
		appErr   thrift.TApplicationException
		transErr thrift.TTransportException
		protoErr thrift.TProtocolException
	)
	switch {
	case c.closed.Load():
		e.Kind = ErrClosed
	case o.attemptTimeout:
		e.Kind = ErrAttemptTimeout
		if errors.Is(err, context.DeadlineExceeded) {
			// Not the caller's deadline: keep it out of the chain.
			e.Err = fmt.Errorf("no reply within %s", c.cfg.AttemptTimeout)
		}
	case ctx.Err() != nil:
		e.Err = ctx.Err()
	case errors.As(err, &appErr):
		// The node answered with an exception: not a transport failure.
	case errors.As(err, &transErr), errors.As(err, &protoErr):
		e.Kind = ErrTransport
	}
	return e
}

// NodeError is the error of one attempt that reached for a node and got no response. Kind
// is the sentinel that says what kind of failure it was (ErrNodeUnavailable, ErrTransport,
// ErrAttemptTimeout, ErrClosed), or nil for an error the client does not judge (the
// caller's context ended, an application exception); Err is the cause. errors.Is and
// errors.As see both.
type NodeError struct {
	// Op is the operation's name.
	Op string
	// Node is the node's id.
	Node int32
	// Addr is the node's host:port.
	Addr string
	// Kind is the failure's sentinel, or nil.
	Kind error
	// Err is the cause.
	Err error
}

// Error names the operation, the node, the kind and the cause.
func (e *NodeError) Error() string {
	s := fmt.Sprintf("zaris: %s at node %d (%s)", e.Op, e.Node, e.Addr)
	if e.Kind != nil {
		s += ": " + e.Kind.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the cause.
func (e *NodeError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// poolFor returns the pool of the node at addr, making it on first use, or nil when no
// node of the current map listens there (it left the map) or the Cluster is closed.
func (c *Cluster) poolFor(addr string) *pool {
	if p := (*c.pools.Load())[addr]; p != nil {
		return p
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	// retirePools runs under poolMu after a new map is installed, so either it sees the
	// pool made here, or this check sees the new map.
	m := *c.pools.Load()
	if p := m[addr]; p != nil {
		return p
	}
	t := c.router.Table()
	if c.closed.Load() || t == nil || !t.HasAddr(addr) {
		return nil
	}
	p := newPool(addr, c.cfg.PoolSize, c.dial)
	nm := maps.Clone(m)
	nm[addr] = p
	c.pools.Store(&nm)
	return p
}

// retirePools closes the pools of nodes that are not in the newly installed map cur:
// idle connections now, borrowed ones when they come back.
func (c *Cluster) retirePools(_, cur *RoutingTable) {
	if c.pipes != nil {
		c.pipes.retire(cur)
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	kept := c.retired[:0]
	for _, p := range c.retired {
		if p.openCount() > 0 {
			kept = append(kept, p)
		}
	}
	c.retired = kept
	m := *c.pools.Load()
	var nm map[string]*pool
	for addr, p := range m {
		if cur.HasAddr(addr) {
			continue
		}
		if nm == nil {
			nm = maps.Clone(m)
		}
		delete(nm, addr)
		p.close(false)
		c.retired = append(c.retired, p)
	}
	if nm != nil {
		c.pools.Store(&nm)
	}
}

// fetchMap asks the nodes of the current map, then the seeds, for a cluster map, and
// returns the first whose epoch is at least minEpoch, or else the newest it got: a node
// that has not yet learnt the map an answer showed (B1) is passed over for one that has.
func (c *Cluster) fetchMap(ctx context.Context, minEpoch int64) (*zaris.ClusterMap, error) {
	var addrs []string
	if t := c.router.Table(); t != nil {
		for _, n := range t.Nodes() {
			addrs = append(addrs, n.Addr)
		}
	}
	for _, s := range c.cfg.Seeds {
		if !contains(addrs, s) {
			addrs = append(addrs, s)
		}
	}
	var (
		newest *zaris.ClusterMap
		errs   []error
	)
	for _, addr := range addrs {
		m, err := c.fetchFrom(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if m.Epoch >= minEpoch {
			return m, nil
		}
		if newest == nil || m.Epoch > newest.Epoch {
			newest = m
		}
	}
	if newest != nil {
		return newest, nil
	}
	return nil, fmt.Errorf("zaris: no node answered with a cluster map: %w", errors.Join(errs...))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// fetchFrom asks the node at addr for its cluster map within one attempt timeout, over a
// pooled connection if the node is in the map, else over a connection of its own.
func (c *Cluster) fetchFrom(ctx context.Context, addr string) (*zaris.ClusterMap, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	p := c.poolFor(addr)
	var (
		conn Conn
		err  error
	)
	if p != nil {
		conn, err = p.get(ctx)
	} else {
		conn, err = c.dial(ctx, addr)
	}
	if err != nil {
		return nil, err
	}
	var m *zaris.ClusterMap
	spent := false
	if sc, ok := conn.(*thriftConn); ok {
		dl, _ := ctx.Deadline()
		stop := sc.arm(ctx, dl)
		m, err = sc.client.GetClusterMap(withoutDeadline{ctx})
		spent = !stop()
	} else {
		m, err = conn.Client().GetClusterMap(ctx)
	}
	if err == nil && m == nil {
		err = ErrNoResponse
	}
	switch {
	case p == nil:
		conn.Close()
	case err != nil || spent:
		p.discard(conn)
	default:
		p.put(conn)
	}
	return m, err
}
