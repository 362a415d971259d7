// Package middleware turns one attempt at a Zaris call into a call that absorbs ownership
// churn: it classifies each attempt's outcome, refreshes the cluster map when it is stale,
// backs off, bounds the call by attempts and by time, and returns answers unchanged.
//
// # Model
//
// A Handler handles one *runtime.Call; a Middleware wraps a Handler in one concern and is
// applied once, when a stack is built (Chain composes them, first listed outermost). The
// Call carries the state the layers share: the operation descriptor (read or write,
// idempotent, guards), the whole-call deadline, every attempt (node, map epoch, status or
// error, whether the request was sent, and its Class) and the call's stats (refreshes
// requested and performed, time in backoff). Each layer fills its part and reads the others'.
//
// The concerns, one file each:
//
//   - Classify (classify.go) is the only place that looks at statuses and raw errors. A
//     chain of small Classifiers, first definite answer wins, sorts every outcome into
//     Answer, Retry, RefreshRetry or Fatal (rules R1, R2, R3, R8), and rule B2 then makes a
//     failed write that may have been applied, on an operation that is neither idempotent
//     nor guarded, an error matching runtime.ErrInDoubt instead of a replay.
//   - RefreshOnMoved (refresh.go) asks the shared MapRefresher for one refresh before a
//     retry that follows a RefreshRetry outcome, and reports newer epochs seen in answers
//     (R2, R6, B1).
//   - Backoff (backoff.go) waits Delay before each retry (R5).
//   - Deadline (deadline.go) sets the whole-call deadline (R4).
//   - Retry (retry.go) is the attempt loop, bounded by attempts and by the deadline (R4, R7),
//     ending without an answer in a *runtime.CallError that names the bound and carries
//     every attempt (B4).
//   - Budget (budget.go) optionally caps retries to a share of calls (B3).
//   - Batches (batch.go) runs multi-key calls: it splits the items by owner, sends one
//     sub-request per owner in parallel through the retry layer as a single attempt, and
//     applies the rules above to the items that met churn only: one backoff and one map
//     refresh per round, both bounds, the Migrating factor, B2 and R9 per item, and the
//     retry budget (B3) once per batch call and once per retried sub-request.
//
// Everything after Classify decides by the Class and by errors.Is and errors.As, never by
// an error's text.
//
// # The default stack
//
// Default builds the stack, in one function, in this order (outermost first):
//
//	call-level middleware      WithCallMiddleware: once per call, sees the final outcome
//	Deadline
//	Batches                    multi-key calls only: per owner, one sub-request per round
//	Retry                      the attempt loop; per attempt:
//	    Budget                 WithRetryBudget only
//	    Backoff
//	    RefreshOnMoved
//	    Classify
//	    attempt-level middleware   WithAttemptMiddleware: once per attempt, raw outcome
//	transport                  runtime.Cluster.Invoke: one attempt on one pooled connection
//
// User middleware plugs in at the two named places: in front of the retry layer (logging,
// tracing, metrics of calls) and behind it (per-attempt logging, fault injection). ForOps
// limits a middleware to some operations, named by their generated descriptors. The
// built-ins are exported, so a stack in another order is a Chain of them.
//
// An attempt-level middleware can end a call before its attempt is sent by returning a
// *StopError; Budget and Backoff use it.
//
// # Time
//
// Every layer reads time and waits through the runtime.Clock it is given (cfg.Clock in
// Default), so the timing rules are tested with middlewaretest.Clock, exactly and without
// sleeping. The context's own deadline, which is on the wall clock, is carried over as the
// time remaining.
//
// # Concurrency
//
// A stack is built once and is safe for concurrent use by any number of calls, provided
// the transport, the MapRefresher and any added middleware are: the built-in layers keep no
// per-call state outside the Call, and a RetryBudget is shared safely. A Call belongs to
// one goroutine at a time; middleware may read and update it while it handles it, and must
// not keep it after returning.
package middleware
