package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// MaxAttempts returns the attempt cap of call under p (R4, R7): one when retries are
// disabled, whatever else says; else the call's own cap if set, else the policy's; never
// less than one.
func MaxAttempts(p runtime.RetryPolicy, call *runtime.Call) int {
	if p.Disabled {
		return 1
	}
	n := p.MaxAttempts
	if call.MaxAttempts > 0 {
		n = call.MaxAttempts
	}
	return max(n, 1)
}

// Retry returns the call-level middleware that runs the attempt loop of rules R4 and R7:
// it makes attempts through the attempt-level middleware attempt (first listed outermost)
// and next while attempts remain (an attempt that Uncounted reports does not use one up,
// rule B7) and the call's deadline has not passed, and acts on each
// attempt's Class: an Answer is returned, Retry and RefreshRetry go on, Fatal ends the
// call. A call that ends without an answer returns the last response, if any, and a
// *runtime.CallError naming the bound and carrying every attempt (B4), its Elapsed counted
// from call.Start when the deadline layer set it; a *StopError from an attempt-level layer
// ends the call before its attempt is sent.
func Retry(p runtime.RetryPolicy, clock clock.Clock, attempt ...Middleware) Middleware {
	clock = orSystem(clock)
	inner := Chain(attempt...)
	return func(next Handler) Handler {
		h := inner(next)
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			return retryLoop(ctx, call, h, p, clock)
		}
	}
}

func retryLoop(ctx context.Context, call *runtime.Call, h Handler, p runtime.RetryPolicy, clock clock.Clock) (runtime.Response, error) {
	start := callStart(call, clock)
	limit := MaxAttempts(p, call)
	var resp runtime.Response // the last attempt's response
	n := 1                    // the attempt about to be made, counted as R4 counts them (see Uncounted)
	// The first attempt's deadline check reads the time the loop started; each later one
	// reads the clock again.
	for now := start; n <= limit && (call.Deadline.IsZero() || now.Before(call.Deadline)); n, now = n+1, clock.Now() {
		if err := ctx.Err(); err != nil {
			return resp, endCall(call, clock, start, limit, stopForContext(ctx, err), nil)
		}
		call.StartAttempt()
		r, err := h(ctx, call)
		if err != nil {
			if stop, ok := errors.AsType[*StopError](err); ok {
				// The attempt was never made: forget it and end with the last outcome.
				call.DropAttempt()
				return resp, endCall(call, clock, start, limit, stop, nil)
			}
		}
		resp = r
		a := call.Last()
		switch classOf(a, err) {
		case runtime.Answer:
			return resp, err
		case runtime.Retry, runtime.RefreshRetry:
			if Uncounted(p, limit, call.Attempts, call.Deadline, clock.Now()) {
				n-- // it never left, and the wait for a new owner that follows is no attempt (B7)
			}
			continue
		}
		if a.Err == nil {
			a.Err = err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The call's context ended (the caller gave up, or the deadline passed) during
			// the attempt: say so, whatever error the attempt reported.
			return resp, endCall(call, clock, start, limit, stopForContext(ctx, ctxErr), err)
		}
		bound := runtime.BoundNone
		if !beforeDeadline(clock, call.Deadline) && errors.Is(err, context.DeadlineExceeded) {
			bound = runtime.BoundDeadline
		}
		return resp, endCall(call, clock, start, limit, &StopError{Bound: bound}, err)
	}
	bound := runtime.BoundDeadline
	if n > limit {
		bound = runtime.BoundAttempts
	}
	return resp, endCall(call, clock, start, limit, &StopError{Bound: bound}, nil)
}

// classOf is the class the loop acts on: the attempt's, or for an unclassified attempt an
// answer without an error and fatal with one.
func classOf(a *runtime.Attempt, err error) runtime.Class {
	if a.Class != runtime.Unclassified {
		return a.Class
	}
	if err == nil {
		return runtime.Answer
	}
	return runtime.Fatal
}

// callStart is when call started: call.Start, the deadline layer's reading of clock, else
// (a stack without that layer) now on clock.
func callStart(call *runtime.Call, clock clock.Clock) time.Time {
	if call.Start.IsZero() {
		return clock.Now()
	}
	return call.Start
}

func beforeDeadline(clock clock.Clock, deadline time.Time) bool {
	return deadline.IsZero() || clock.Now().Before(deadline)
}

// endCall builds the call's terminal error: stop says which bound ended it and why; cause,
// when set, is the error that ended it, else the last attempt's cause.
func endCall(call *runtime.Call, clock clock.Clock, start time.Time, limit int, stop *StopError, cause error) *runtime.CallError {
	if cause == nil {
		cause = lastCause(call)
	}
	err := cause
	switch {
	case stop.Err != nil && cause != nil && !errors.Is(cause, stop.Err):
		err = fmt.Errorf("%w; last attempt: %w", stop.Err, cause)
	case stop.Err != nil && cause == nil:
		err = stop.Err
	case err == nil && stop.Bound == runtime.BoundDeadline:
		err = context.DeadlineExceeded
	}
	return &runtime.CallError{
		Op:          opName(call),
		Bound:       stop.Bound,
		MaxAttempts: limit,
		Attempts:    append([]runtime.Attempt(nil), call.Attempts...),
		Statuses:    statusesOf(call),
		Elapsed:     clock.Now().Sub(start),
		Err:         err,
	}
}

// lastCause is the last attempt's cause: its error, or a *runtime.StatusError for a status.
func lastCause(call *runtime.Call) error {
	a := call.Last()
	switch {
	case a == nil:
		return nil
	case a.Err != nil:
		return a.Err
	case a.Answered:
		return runtime.NewStatusError(statusesOf(call), a.Status)
	}
	return nil
}
