package runtime

import (
	"context"
	"time"
)

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
