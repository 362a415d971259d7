package runtime

import (
	"context"
	"errors"
	"time"
)

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
//   - the Engine is closed: ErrClosed.
//
// Any error closes the connection. Invoke does not refresh the map itself: the refresh
// layer above it decides when (rules R2, R3, B1) and asks Refresher.
func (c *Engine) Invoke(ctx context.Context, call *Call) (Response, error) {
	a := call.Current()
	start := c.clock.Now()
	resp, err := c.invoke(ctx, call, a)
	a.Duration = c.clock.Now().Sub(start)
	a.Err = err
	return resp, err
}

func (c *Engine) invoke(ctx context.Context, call *Call, a *Attempt) (Response, error) {
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
func (c *Engine) attemptDeadline(call *Call) (deadline time.Time, callBound bool) {
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
func (c *Engine) borrow(ctx context.Context, p *pool, deadline time.Time) (Conn, error) {
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
