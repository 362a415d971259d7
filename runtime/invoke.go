package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Invoke sends one attempt of call to call.Target when set (a multi-key sub-request), else to
// the owner of call.Key under the current map, within the attempt timeout, and records the
// facts on call.Current() for the classify layer to judge. Any status comes back as a
// response with a nil error; a failure is a *PartitionError, a *NodeError whose kind
// (ErrNodeUnavailable, ErrTransport, ErrAttemptTimeout, ErrRequestTooLarge, ErrClosed, or
// none for the caller's context and application exceptions) says what happened, or
// ErrClosed. It never refreshes the map itself.
func (c *Engine) Invoke(ctx context.Context, call *Call) (Response, error) {
	a := call.Current()
	start := c.clock.Now()
	call.attemptStart = start
	if !c.sysClock {
		call.attemptStart = time.Now()
	}
	resp, err := c.invoke(ctx, call, a, start)
	d := c.since(start) // the attempt's one reading at its end
	if call.debt.owed {
		call.debt.settle(start, d, a.Answered)
	}
	a.finish(start, d, err)
	return resp, err
}

// invoke is Invoke after its clock readings: start is the attempt's start on the Clock,
// call.attemptStart on the wall clock.
func (c *Engine) invoke(ctx context.Context, call *Call, a *Attempt, start time.Time) (Response, error) {
	a.Sent = false
	if c.closed.Load() {
		return nil, ErrClosed
	}
	r, err := c.routeCall(call)
	a.begin(r)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// The caller has gone: nothing is sent, so the node cannot apply it (rule B2).
		return nil, c.noConnError(ctx, call, r, err)
	}
	deadline, callBound := c.attemptDeadline(call, start)
	if !call.Token.IsZero() {
		left, replay, err := c.replayBound(call, a, start)
		if err != nil {
			return nil, err
		}
		if replay && left < deadline.Sub(call.attemptStart) {
			deadline, callBound = call.attemptStart.Add(left), false
		}
	}
	call.debt = debt{h: c.health, n: c.health.node(r.Addr)} // owed once written (rule B6)
	var resp Response
	if c.pipes != nil {
		resp, err = c.invokePipelined(ctx, call, a, r, deadline, callBound)
	} else {
		resp, err = c.invokePooled(ctx, call, a, r, deadline, callBound)
	}
	return resp, err // Invoke settles call.debt
}

// since is the time from start, a Clock reading, to now.
func (c *Engine) since(start time.Time) time.Duration {
	if c.sysClock {
		return time.Since(start) // reads only the monotonic clock
	}
	return c.clock.Now().Sub(start)
}

// invokePooled sends the attempt over a connection borrowed from the node's pool.
func (c *Engine) invokePooled(ctx context.Context, call *Call, a *Attempt, r clustermap.Route, deadline time.Time, callBound bool) (Response, error) {
	p := c.poolFor(r.Addr)
	conn, err := c.borrow(ctx, p, deadline, call.attemptStart)
	if err == nil && ctx.Err() != nil {
		p.put(conn) // the caller left while it waited: send nothing
		err = ctx.Err()
	}
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	if ok, ended := c.watchOwner(conn, call, r); !ok {
		if ended {
			p.discard(conn) // an install closed it meanwhile
		} else {
			p.put(conn)
		}
		return nil, c.ownerMovedUnsent(ctx, call, r)
	}
	var (
		resp Response
		o    outcome
	)
	if sc, ok := conn.Conn.(*thriftConn); ok {
		sc.sock.debt = &call.debt
		resp, o = callSocket(ctx, sc, call, deadline, callBound, call.attemptStart, c.lateTimeout)
		sc.sock.debt = nil
	} else {
		resp, o = callConn(ctx, conn.Conn, call, deadline, callBound)
	}
	if conn.inFlight.finish() {
		// The install closed the connection; a reply that came first is kept.
		o.spent, o.ownerMoved = true, o.err != nil
	}
	a.Sent = !o.unsent
	if o.err == nil {
		if o.spent {
			p.discard(conn)
		} else {
			p.put(conn)
		}
		a.RecordAnswer(call.Op.Status(resp), resp.GetMapEpoch())
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
	unsent         bool // it failed before any byte of the request reached the socket
	ownerMoved     bool // a newer map moved the segment away from the node meanwhile (B6)
}

// errNoConnInTime is the cause of an attempt that found no free connection in time.
var errNoConnInTime = errors.New("no free connection within the attempt timeout")

// attemptDeadline is when the attempt must end: the attempt timeout from its start, or the
// call's deadline (call.Deadline, set by the deadline layer) if that comes first, in which
// case callBound is true. It covers waiting for a connection and the call, and it is a
// socket deadline, so it is wall-clock time whatever the Clock: the call's deadline is
// carried over as the time left until it on the Clock at start, the attempt's start.
func (c *Engine) attemptDeadline(call *Call, start time.Time) (deadline time.Time, callBound bool) {
	now := call.attemptStart
	deadline = now.Add(c.cfg.AttemptTimeout)
	if !call.Deadline.IsZero() {
		if d := now.Add(call.Deadline.Sub(start)); d.Before(deadline) {
			return d, true
		}
	}
	return deadline, false
}

// borrow gets a connection from p, an idle one at once if it can, else waiting or dialing
// until deadline; a nil p (the node is not in the map) has none. now is the wall-clock time.
func (c *Engine) borrow(ctx context.Context, p *pool, deadline, now time.Time) (*pooledConn, error) {
	if p == nil {
		return nil, errPoolClosed
	}
	if conn, ok := p.tryIdle(now); ok {
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
