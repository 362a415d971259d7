package middleware

import (
	"context"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// Deadline returns the call-level middleware that sets the whole-call deadline of rule R4:
// call.Deadline becomes the earliest of the context's deadline, an earlier call.Deadline,
// and now on clock plus the call's timeout (call.Timeout, else p.RequestTimeout;
// zero means no bound, a negative call timeout no time at all), and call.Start the time
// it read that now at. Every layer that waits stops at call.Deadline itself (README.md in
// this directory, Time).
func Deadline(p runtime.RetryPolicy, clock clock.Clock) Middleware {
	clock = orSystem(clock)
	// On the system clock the context's deadline is already on clock: it is taken as it is,
	// to the nanosecond, so a layer below can tell the two deadlines apart.
	system := isSystem(clock)
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			now := clock.Now()
			deadline := call.Deadline
			// The context's deadline is on the wall clock; carry what is left of it over to
			// an injected clock, so that it sees the same remaining time.
			ctxDeadline, hasCtxDeadline := ctx.Deadline()
			var ctxEnd time.Time
			if hasCtxDeadline {
				ctxEnd = ctxDeadline
				if !system {
					ctxEnd = now.Add(time.Until(ctxDeadline))
				}
				deadline = earliest(deadline, ctxEnd)
			}
			timeout := p.RequestTimeout
			switch {
			case call.Timeout < 0: // WithTimeout of zero or less: no time left
				deadline, timeout = earliest(deadline, now), 0
			case call.Timeout > 0:
				timeout = call.Timeout
			}
			if timeout > 0 {
				deadline = earliest(deadline, now.Add(timeout))
			}
			call.Deadline, call.Start = deadline, now
			return next(ctx, call)
		}
	}
}

// earliest returns the earlier of two deadlines, where zero means none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
