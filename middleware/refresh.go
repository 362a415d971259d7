package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// MapRefresher is the part of the client's shared map refresher (runtime.Refresher) that
// the refresh layer uses. Its methods must be safe for concurrent use.
type MapRefresher interface {
	// Refresh asks for one shared refresh of the cluster map and waits for it, at most the
	// refresh wait or until ctx ends (R6). ev.Epoch newer than the client's map skips the
	// debounce (B1); a request the debounce holds back whose ev.At no completed fetch has
	// seen gets a fetch at the end of the window (B7).
	Refresh(ctx context.Context, ev clustermap.Evidence) clustermap.RefreshResult
	// AwaitOwner waits until the client's map names an owner other than node gone for
	// key, riding the shared fetches, one per debounce window (B7), or until ctx ends or
	// the clock passes until (zero: no bound), with TimedOut set.
	AwaitOwner(ctx context.Context, key []byte, gone int32, until time.Time) clustermap.RefreshResult
	// Observe reports that an answer carried map epoch epoch; a newer epoch than the
	// client's triggers a refresh without waiting for it (B1).
	Observe(epoch int64)
	// Epoch returns the epoch of the client's current map.
	Epoch() int64
}

// RefreshOnMoved returns the attempt-level middleware of rules R2, R3, B1 and B7. Before an
// attempt that follows one that could not reach its node (OwnerWaitUntil), it waits for a
// map that names another owner, the wait B7 puts in place of the backoff; before one that
// follows any other RefreshRetry attempt, or when that wait ran out, it asks r for one
// shared refresh with the previous attempt's answer epoch and end time as evidence. Both
// are counted in call.Stats. After an answer whose epoch is newer than r's map it calls
// r.Observe without waiting. It sits above Classify, so it reads the class of the
// attempt it ran.
func RefreshOnMoved(r MapRefresher, p runtime.RetryPolicy, clock clock.Clock) Middleware {
	clock = orSystem(clock)
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if call.Previous() != nil {
				step := callStep(p, call, clock.Now())
				var waits []ownerWait
				if step.awaits {
					waits = []ownerWait{step.wait}
				}
				if stop := awaitThenRefresh(ctx, clock, r, call, waits, step.refresh, step.ev); stop != nil {
					return nil, stop
				}
			}
			resp, err := next(ctx, call)
			a := call.Current()
			if a.Answered && a.AnswerEpoch > r.Epoch() {
				r.Observe(a.AnswerEpoch)
			}
			if !a.Answered && a.End.IsZero() {
				a.End = clock.Now() // a transport of the user's: the evidence is seen now
			}
			return resp, err
		}
	}
}

// awaitThenRefresh takes what follows the backoff in a retry step of call: its waits for a
// new owner (B7), then one shared refresh (R2, R3) when the step asks for one (refresh,
// with evidence ev) or a wait ran out (with the evidence of the attempts whose wait did);
// both are counted in call.Stats. It returns the StopError of a call whose context ended
// meanwhile, or whose deadline passed in the waits; nil to go on.
func awaitThenRefresh(ctx context.Context, clock clock.Clock, r MapRefresher, call *runtime.Call, waits []ownerWait, refresh bool, ev clustermap.Evidence) *StopError {
	if len(waits) > 0 {
		waited, timedOut := awaitOwners(ctx, clock, r, &call.Stats, waits)
		if err := ctx.Err(); err != nil {
			return stopForContext(ctx, err)
		}
		if !beforeDeadline(clock, call.Deadline) {
			return &StopError{Bound: runtime.BoundDeadline}
		}
		if timedOut {
			refresh, ev = true, newer(ev, waited)
		}
	}
	if !refresh {
		return nil
	}
	res := refreshBefore(ctx, clock, call.Deadline, r, ev)
	call.Stats.RefreshesRequested++
	if res.Performed {
		call.Stats.RefreshesPerformed++
	}
	if err := ctx.Err(); err != nil {
		return stopForContext(ctx, err)
	}
	return nil
}

// awaitOwners waits (B7) for each of waits in turn until its map is in or its bound passes,
// stopping early when ctx ends; the waits share the fetches, so once one's map is in, the
// next is a look at it. It counts them in stats as one wait and one refresh request, and
// reports whether any ran out, with the newest evidence of those that did.
func awaitOwners(ctx context.Context, clock clock.Clock, r MapRefresher, stats *runtime.CallStats, waits []ownerWait) (ev clustermap.Evidence, timedOut bool) {
	start := clock.Now()
	performed := false
	for _, w := range waits {
		res := r.AwaitOwner(ctx, w.key, w.gone, w.until)
		performed = performed || res.Performed
		if res.TimedOut {
			timedOut, ev = true, newer(ev, w.ev)
		}
		if ctx.Err() != nil {
			break
		}
	}
	stats.OwnerWaits++
	stats.OwnerWait += clock.Now().Sub(start)
	stats.RefreshesRequested++
	if performed {
		stats.RefreshesPerformed++
	}
	return ev, timedOut
}

// Unreachable reports whether attempt a could not reach its node at all (rule B7): no
// connection could be had (runtime.ErrNodeUnavailable: the dial was refused or timed out,
// or none was free in time) or no reply came within the attempt timeout
// (runtime.ErrAttemptTimeout). A reset or an end of file on an open connection is not
// that: the connection may be at fault rather than the node.
func Unreachable(a *runtime.Attempt) bool {
	return a != nil && !a.Answered && a.Node != clustermap.NoNode &&
		(errors.Is(a.Err, runtime.ErrNodeUnavailable) || errors.Is(a.Err, runtime.ErrAttemptTimeout))
}

// OwnerWaitUntil reports whether the attempt after prior (the call's attempts so far,
// oldest first) waits for a map that names another owner instead of backing off (rule
// B7), and until when: the last of prior could not reach its node (Unreachable),
// p.OwnerWait is positive, and now is before p.OwnerWait after the end of the first
// attempt of prior that could not reach its node, and before deadline (zero: none),
// which also bounds until.
func OwnerWaitUntil(p runtime.RetryPolicy, prior []runtime.Attempt, deadline, now time.Time) (until time.Time, ok bool) {
	if p.OwnerWait <= 0 || len(prior) == 0 || !Unreachable(&prior[len(prior)-1]) {
		return time.Time{}, false
	}
	for i := range prior {
		if Unreachable(&prior[i]) {
			until = prior[i].End.Add(p.OwnerWait)
			break
		}
	}
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	return until, now.Before(until)
}

// Uncounted reports whether the last of attempts does not count toward the call's
// maxAttempts (rules R4 and B7): the call may retry at all (limit above one), the attempt
// never left because its node could not be reached (Unreachable, not Sent: the dial was
// refused or timed out, no connection was free), and the next attempt waits for a map
// that names another owner (OwnerWaitUntil). Such an attempt put no load on the store, and
// each one is followed by a wait that ends only when the owner moved or B7's bound passed,
// so the attempts it adds are bounded by the owners that die within that bound.
func Uncounted(p runtime.RetryPolicy, limit int, attempts []runtime.Attempt, deadline, now time.Time) bool {
	if limit < 2 || len(attempts) == 0 {
		return false
	}
	if last := &attempts[len(attempts)-1]; last.Sent {
		return false
	}
	_, ok := OwnerWaitUntil(p, attempts, deadline, now)
	return ok
}

// refreshBefore asks r for a refresh, waiting no later than deadline (on clock; zero: no
// bound) or the end of ctx. Only a call that is retrying pays for the bounded context.
func refreshBefore(ctx context.Context, clock clock.Clock, deadline time.Time, r MapRefresher, ev clustermap.Evidence) clustermap.RefreshResult {
	if !deadline.IsZero() {
		left := deadline.Sub(clock.Now())
		if ctxDeadline, ok := ctx.Deadline(); !ok || time.Until(ctxDeadline) > left {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, left)
			defer cancel()
		}
	}
	return r.Refresh(ctx, ev)
}
