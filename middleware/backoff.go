package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// Delay returns how long to wait before the attempt after attempt n (n >= 1), by rule R5:
// p.Backoff*n; times slow, the slow factor of the attempt just finished (see SlowFactor),
// when above 1; capped at p.MaxBackoff (zero means no cap); clamped to the time left between
// now and deadline, and zero when none is left. A zero deadline means the call has none.
// Delay is a pure function, so the numbers of R5 are tested without a clock.
func Delay(p runtime.RetryPolicy, n, slow int, now, deadline time.Time) time.Duration {
	if n < 1 || p.Backoff <= 0 {
		return 0
	}
	factor := time.Duration(n)
	if slow > 1 {
		factor *= time.Duration(slow)
	}
	d := p.Backoff * factor
	if d/factor != p.Backoff { // overflow: as long as a delay can be
		d = time.Duration(1<<63 - 1)
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	if !deadline.IsZero() {
		left := deadline.Sub(now)
		if left <= 0 {
			return 0
		}
		d = min(d, left)
	}
	return d
}

// SlowFactor returns what the delay after attempt last (nil: none) of call is multiplied by
// (R5): for an answer, the factor the IDL's status table declares for its status
// (call.Op.Statuses), or p.SlowFactor in its place when positive; else 1.
func SlowFactor(p runtime.RetryPolicy, call *runtime.Call, last *runtime.Attempt) int {
	if last == nil || !last.Answered || call.Op == nil {
		return 1
	}
	f := call.Op.Statuses.SlowFactor(int64(last.Status))
	if f > 1 && p.SlowFactor > 0 {
		return p.SlowFactor
	}
	return f
}

// AtOnce reports whether the attempt after last (nil: none) goes with no backoff: last ended
// because a newer map, already installed, moved its segment away (runtime.ErrOwnerMoved,
// rule B6), so the new owner is known.
func AtOnce(last *runtime.Attempt) bool {
	return last != nil && !last.Answered && errors.Is(last.Err, runtime.ErrOwnerMoved)
}

// Backoff returns the attempt-level middleware that waits before every attempt but the
// first: Delay(p, n-1, SlowFactor of the previous attempt, now, call.Deadline), none when
// AtOnce or when the refresh layer waits for a new owner instead (OwnerWaitUntil, rule
// B7), slept on clock so that a cancelled context ends the wait. It adds the wait to
// call.Stats.Backoff.
//
// When the context ends during the wait, or the wait uses up the time left before the
// call's deadline, the attempt is not made: Backoff returns a *StopError and the retry
// layer ends the call (R4, R5).
func Backoff(p runtime.RetryPolicy, clock clock.Clock) Middleware {
	clock = orSystem(clock)
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if call.Previous() == nil {
				return next(ctx, call)
			}
			now := clock.Now()
			if stop := sleepBackoff(ctx, clock, call, callStep(p, call, now).backoff, now); stop != nil {
				return nil, stop
			}
			return next(ctx, call)
		}
	}
}

// sleepBackoff sleeps d on clock (not at all when d is zero), adds the time since now to
// call.Stats.Backoff, and returns the StopError of a sleep that ctx ended, or of a call
// whose deadline has passed by then; nil to go on.
func sleepBackoff(ctx context.Context, clock clock.Clock, call *runtime.Call, d time.Duration, now time.Time) *StopError {
	if d > 0 {
		err := clock.Sleep(ctx, d)
		call.Stats.Backoff += clock.Now().Sub(now)
		if err != nil {
			return stopForContext(ctx, err)
		}
	}
	if !beforeDeadline(clock, call.Deadline) {
		return &StopError{Bound: runtime.BoundDeadline}
	}
	return nil
}

// stopForContext is the StopError for a wait ended by ctx: the deadline bound when the
// context's deadline passed, no bound when it was cancelled.
func stopForContext(ctx context.Context, err error) *StopError {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &StopError{Bound: runtime.BoundDeadline, Err: err}
	}
	return &StopError{Bound: runtime.BoundNone, Err: err}
}
