package middleware

import (
	"context"
	"time"

	"github.com/clustron/zaris-go/runtime"
)

// MapRefresher is the part of the client's shared map refresher (runtime.Refresher) that
// the refresh layer uses. Its methods must be safe for concurrent use.
type MapRefresher interface {
	// Refresh asks for one shared refresh of the cluster map and waits for it, at most the
	// refresh wait or until ctx ends (R6). evidence is the newest map epoch an answer
	// showed, or 0; a newer epoch than the client's skips the debounce (B1).
	Refresh(ctx context.Context, evidence int64) runtime.RefreshResult
	// Observe reports that an answer carried map epoch epoch; a newer epoch than the
	// client's triggers a refresh without waiting for it (B1).
	Observe(epoch int64)
	// Epoch returns the epoch of the client's current map.
	Epoch() int64
}

// RefreshOnMoved returns the attempt-level middleware of rules R2, R3 and B1: before an
// attempt that follows a RefreshRetry attempt it asks r for one shared refresh, with the
// previous answer's epoch as evidence, and waits for it (counted in call.Stats); after an
// answer whose epoch is newer than r's map it calls r.Observe without waiting. It sits
// above Classify, so it reads the class of the attempt it ran.
func RefreshOnMoved(r MapRefresher, clock runtime.Clock) Middleware {
	if clock == nil {
		clock = runtime.SystemClock
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if n := len(call.Attempts); n > 1 && call.Attempts[n-2].Class == runtime.RefreshRetry {
				prev := &call.Attempts[n-2]
				var evidence int64
				if prev.Answered {
					evidence = prev.AnswerEpoch
				}
				res := refreshBefore(ctx, clock, call.Deadline, r, evidence)
				call.Stats.RefreshesRequested++
				if res.Performed {
					call.Stats.RefreshesPerformed++
				}
				if err := ctx.Err(); err != nil {
					return nil, stopForContext(ctx, err)
				}
			}
			resp, err := next(ctx, call)
			if a := call.Current(); a.Answered && a.AnswerEpoch > r.Epoch() {
				r.Observe(a.AnswerEpoch)
			}
			return resp, err
		}
	}
}

// refreshBefore asks r for a refresh, waiting no later than deadline (on clock; zero: no
// bound) or the end of ctx. Only a call that is retrying pays for the bounded context.
func refreshBefore(ctx context.Context, clock runtime.Clock, deadline time.Time, r MapRefresher, evidence int64) runtime.RefreshResult {
	if !deadline.IsZero() {
		left := deadline.Sub(clock.Now())
		if ctxDeadline, ok := ctx.Deadline(); !ok || time.Until(ctxDeadline) > left {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, left)
			defer cancel()
		}
	}
	return r.Refresh(ctx, evidence)
}
