package runtime

import (
	"context"
	"time"
)

// lateAttemptTimeout is how late, at most, the socket of a pooled connection may end an
// attempt past its attempt timeout t: 1/64 of it, at most 10 ms. A connection's deadline
// then moves once in that time, not on every call (each move costs a lock and a timer
// update in the Go runtime). A call's deadline (Call.Deadline, the context's) is kept
// exactly.
func lateAttemptTimeout(t time.Duration) time.Duration {
	return min(t/64, 10*time.Millisecond)
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

// callSocket runs call over a built-in connection, starting at now (wall clock). The
// deadline (or the caller's, if earlier; callerDeadline says the deadline given is already
// the call's) goes on the socket, up to late past it for an attempt timeout (see
// thriftConn.arm), and the caller's cancel aborts the socket through the connection's
// watch on its context: no timer or context is made per call. On a framed binary
// connection an operation with a Codec goes through it (thriftConn.codecCall); else the
// generated code gets a context without a deadline, because the Thrift protocols retry a
// timed-out read while their context has a deadline that has not passed.
func callSocket(ctx context.Context, sc *thriftConn, call *Call, deadline time.Time, callerDeadline bool, now time.Time, late time.Duration) (Response, outcome) {
	octx := ctx
	if cdl, ok := ctx.Deadline(); ok {
		// The connection carries one call at a time, so its wrapper is reused.
		sc.noDeadline.Context = ctx
		octx = &sc.noDeadline
		if !cdl.After(deadline) {
			deadline, callerDeadline = cdl, true
		}
	}
	if callerDeadline {
		late = 0 // a call's deadline is kept to the letter
	}
	stop := sc.arm(ctx, deadline, now, late)
	sc.sock.wrote = false
	var (
		resp Response
		err  error
	)
	if codec := sc.codec.of(call.Op); codec != nil {
		resp, err = sc.codecCall(call.Op, codec, call.Request)
	} else {
		resp, err = call.Op.Invoke(octx, sc.client, call.Request)
	}
	sc.noDeadline.Context = nil
	o := outcome{spent: !stop(), unsent: err != nil && !sc.sock.wrote}
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
